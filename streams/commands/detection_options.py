"""The detection options that `scan` and `report` share: `--threshold`,
`--mutating-failure-threshold` and the config they build with the worker's settings."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping

from loopwatch.models import DetectionConfig
from loopwatch.streams.settings import ENVIRONMENT, Settings

_INTEGER = re.compile(r"^[+-]?\d+$")
# The flags that override the environment's detection settings.
_FLAGS = ("profile", "threshold", "mutating_failure_threshold")
# The worker's settings that make up its detection config (Settings.detection).
_DETECTION_SETTINGS = frozenset(
    {
        "profile",
        "threshold",
        "mutating_failure_threshold",
        "call_in_turn_threshold",
        "cycle_threshold",
        "error_threshold",
        "call_floor_threshold",
        "result_aware_batches",
    }
)


def add_threshold_options(parser: argparse.ArgumentParser) -> None:
    """`--threshold` and `--mutating-failure-threshold`; unset, the worker's settings (or
    DetectionConfig's defaults) apply."""
    defaults = DetectionConfig()
    parser.add_argument(
        "--threshold",
        help=f"rules 2-4 threshold (default: LOOPWATCH_THRESHOLD, else {defaults.threshold})",
    )
    parser.add_argument(
        "--mutating-failure-threshold",
        help="rule 1 threshold (default: LOOPWATCH_MUTATING_FAILURE_THRESHOLD, else "
        f"{defaults.mutating_failure_threshold})",
    )


def detection_config(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> DetectionConfig:
    """The flags (`--profile`, `--threshold`, `--mutating-failure-threshold`), else the
    worker's detection settings in `environ` (validated by the worker's own parsers),
    else the defaults. Raises ConfigError (a bad flag) or SettingsError (a bad variable)."""
    environ = {} if environ is None else environ
    variables = {
        name
        for field, (name, _parse) in ENVIRONMENT.items()
        if field in _DETECTION_SETTINGS or field.startswith("rule_")
    }
    base = Settings.from_env({k: v for k, v in environ.items() if k in variables}).detection
    values: dict[str, object] = base.model_dump(exclude_unset=True)
    for key in _FLAGS:
        flag: str | None = getattr(args, key, None)
        if flag is not None:
            values[key] = int(flag) if _INTEGER.match(flag.strip()) else flag
    return DetectionConfig(**values)


def session_ttl(environ: Mapping[str, str]) -> float:
    """The worker's idle TTL (`LOOPWATCH_SESSION_TTL_SECONDS`, validated by the worker's
    parser), which `scan` applies per session as the worker does (docs/contract.md §8.5).
    Raises SettingsError for a bad value."""
    name = ENVIRONMENT["session_ttl_seconds"][0]
    picked = {name: environ[name]} if name in environ else {}
    return float(Settings.from_env(picked).session_ttl_seconds)
