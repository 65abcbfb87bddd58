"""Detection config (docs/contract.md §7): thresholds, validated so bad values stop start-up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """An invalid config value; the message names the key and the bad value."""


_THRESHOLD_KEYS = ("threshold", "mutating_failure_threshold")


class DetectionConfig(BaseModel):
    """Thresholds of the four rules."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold: int = 3
    """Repetitions that trigger rules 2-4 (repeated result, read range, batch)."""
    mutating_failure_threshold: int = 2
    """Repetitions of a failed mutating call that trigger rule 1."""

    def __init__(self, **data: Any) -> None:
        _check(data)
        super().__init__(**data)


def _check(data: Mapping[str, Any]) -> None:
    unknown = sorted(set(data) - set(_THRESHOLD_KEYS))
    if unknown:
        raise ConfigError(f"unknown config key {unknown[0]!r}")
    for key in _THRESHOLD_KEYS:
        if key not in data:
            continue
        value = data[key]
        # bool is an int subclass in Python; the contract rejects it explicitly.
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{key} must be an integer >= 1, got {value!r}")
