"""The input and detection options that `scan` and `report` share (`--format`,
`--profile`, `--threshold`, `--mutating-failure-threshold`, `--policy`) and the config they
build with the worker's settings.

Precedence: a flag, else the worker's LOOPWATCH_* detection setting, else the default. A
`--policy` record is a whole config (as on the worker, where a policy replaces the
settings): it replaces the LOOPWATCH_* detection settings, and a flag beside it is an
error, never silently dropped.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass

from loopwatch.models import DEFAULT_KEY, ConfigError, DetectionConfig, InvalidPolicy, PolicyRef
from loopwatch.streams.commands.policy_file import read_policy
from loopwatch.streams.scan.inputs import EVENTS_FORMAT, FORMAT_CHOICES
from loopwatch.streams.scan.transcripts import AUTO
from loopwatch.streams.settings import DAY_SECONDS, ENVIRONMENT, Settings, SettingsError

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
        "message_threshold",
        "condensation_threshold",
        "result_aware_batches",
    }
)


@dataclass(frozen=True)
class Detection:
    """What to judge with: the config, and the policy record it came from (or None)."""

    config: DetectionConfig
    policy: PolicyRef | None = None
    idle_ttl: float = float(DAY_SECONDS)
    """`LOOPWATCH_SESSION_TTL_SECONDS`, applied per session as the worker does (§8.5)."""


def add_detection_options(parser: argparse.ArgumentParser) -> None:
    """`--format`, `--profile`, the thresholds and `--policy`, as `scan` and `report` take
    them."""
    parser.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        default=AUTO,
        help=f"{AUTO} (the default: events or a transcript, told by the input, each "
        f"transcript line in the format it shows), {EVENTS_FORMAT} (loopwatch events, one "
        "per line), or transcripts: openai (Chat messages), anthropic (Messages), responses "
        "(Responses API input items), gemini (contents), bedrock (Converse messages); a "
        "transcript file is one JSON array of messages or one conversation per line; "
        "gzip files are read as they are",
    )
    parser.add_argument(
        "--profile",
        choices=("seed", "extended"),
        help="seed (the default: the four rules of docs/contract.md §4) or extended (§9); "
        "default: LOOPWATCH_PROFILE",
    )
    add_threshold_options(parser)
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="judge every event with this policy record (JSON, as `loopwatch policy set` "
        "takes it, docs/contract.md §9.6) as the key *: it replaces --profile, the "
        "thresholds and the LOOPWATCH_* detection settings (a flag beside it is an error)",
    )


def detection(args: argparse.Namespace, environ: Mapping[str, str]) -> Detection:
    """The config the options and `environ` give. Raises ConfigError (a bad flag, or a
    flag beside `--policy`), SettingsError (a bad variable) or InvalidPolicy."""
    idle_ttl = session_ttl(environ)
    if args.policy is None:
        return Detection(detection_config(args, environ), idle_ttl=idle_ttl)
    beside = [f"--{key.replace('_', '-')}" for key in _FLAGS if getattr(args, key) is not None]
    if beside:
        raise ConfigError(
            f"--policy and {' and '.join(beside)} both given: the policy record sets the "
            "profile and thresholds itself (put them in the record, or drop --policy)"
        )
    policy = read_policy(DEFAULT_KEY, args.policy)
    return Detection(policy.config, policy.ref, idle_ttl)


class OptionsError(Exception):
    """What is wrong with the detection options or the inputs, as one line for the user."""


def detection_for_files(args: argparse.Namespace, environ: Mapping[str, str]) -> Detection:
    """`detection` for a command that reads `args.files` (`scan`, `report`), each way it
    can fail said in one line: raises OptionsError."""
    try:
        judged = detection(args, environ)
    except ConfigError as exc:
        raise OptionsError(f"invalid config: {exc}") from exc
    except SettingsError as exc:
        raise OptionsError(f"invalid setting: {exc}") from exc
    except InvalidPolicy as exc:
        raise OptionsError(f"invalid policy {args.policy}: {exc}") from exc
    if [*args.files, args.policy].count("-") > 1:
        raise OptionsError("standard input (-) can be read only once")
    return judged


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
