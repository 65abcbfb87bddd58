"""Detection config (docs/contract.md §7, §9): profile, thresholds, rule switches, exempt
tools and per-tool thresholds, validated so a bad value names its key and value."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from loopwatch.models.verdicts import ALL_RULES, RULES, RuleName
from loopwatch.models.volatile import ResultCleaner


class ConfigError(ValueError):
    """An invalid config value; the message names the key and the bad value."""


Profile = Literal["seed", "extended"]
PROFILE_RULES: Mapping[Profile, tuple[RuleName, ...]] = {"seed": RULES, "extended": ALL_RULES}
"""The rules each profile enables (contract §9.1)."""

THRESHOLD_KEYS = (
    "threshold",
    "mutating_failure_threshold",
    "call_in_turn_threshold",
    "cycle_threshold",
    "error_threshold",
    "call_floor_threshold",
    "message_threshold",
    "condensation_threshold",
)
EXTENDED_DEFAULTS: Mapping[str, int] = {"threshold": 4, "mutating_failure_threshold": 3}
"""The `extended` profile's own defaults for thresholds a config does not set (issue 31,
docs/rules.md "Thresholds"): peers wait for four identical calls or results, and for
three identical failures, before they nudge. The seed's stay SPEC's 3 and 2."""
MAX_TOOL_ENTRIES = 256
"""Most entries in `exempt_tools` or `tool_thresholds` (a policy is small, and lives in
every worker's memory)."""
MAX_TOOL_NAME_CHARS = 256

# Which threshold each rule uses when no per-tool threshold applies.
_RULE_THRESHOLD: Mapping[RuleName, str] = {
    "repeated_failed_mutation": "mutating_failure_threshold",
    "repeated_result": "threshold",
    "repeated_read_range": "threshold",
    "repeated_batch": "threshold",
    "repeated_call_in_turn": "call_in_turn_threshold",
    "repeated_cycle": "cycle_threshold",
    "repeated_error": "error_threshold",
    "recurring_result": "threshold",
    "repeated_call": "call_floor_threshold",
    "repeated_message": "message_threshold",
    "repeated_condensation": "condensation_threshold",
}


class DetectionConfig(BaseModel):
    """What the rules run and with which thresholds. The defaults are the `seed` profile:
    exactly docs/contract.md §4."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: Profile = "seed"
    """`seed` (docs/contract.md §4's four rules) or `extended` (contract §9.1)."""
    threshold: int = 3
    """Repetitions that trigger rules 2-4 (repeated result, read range, batch) and
    `recurring_result`; 4 by default in `extended` (`EXTENDED_DEFAULTS`)."""
    mutating_failure_threshold: int = 2
    """Repetitions of a failed mutating call that trigger rule 1; 3 by default in
    `extended`."""
    call_in_turn_threshold: int = 3
    """Identical calls in one assistant message that trigger `repeated_call_in_turn`."""
    cycle_threshold: int = 3
    """Repetitions of a cycle of steps that trigger `repeated_cycle`."""
    error_threshold: int = 4
    """Failures in a row of one tool with one error class that trigger `repeated_error`
    (docs/rules.md: at 3 it warned an agent that was about to switch tools)."""
    call_floor_threshold: int = 5
    """The same batch in a row, whatever its results, that triggers `repeated_call`."""
    message_threshold: int = 3
    """The same assistant text in a row, no tool call between, that triggers
    `repeated_message` (contract §9.14)."""
    condensation_threshold: int = 3
    """Context condensations in a row, no model turn between, that trigger
    `repeated_condensation` (contract §9.15)."""
    result_aware_batches: bool | None = None
    """`repeated_batch` compares the steps' outcomes too; None: the profile's choice."""
    rules: dict[RuleName, bool] = {}
    """Rules switched on (true) or off (false) against the profile's set."""
    exempt_tools: tuple[str, ...] = ()
    """A match naming only these tools is ignored (contract §9.6)."""
    tool_thresholds: dict[str, int] = {}
    """A tool's own threshold, replacing the rule's when every named tool has one."""
    volatile_results: bool | None = None
    """Results and errors are compared without their volatile fields (contract §9.9);
    None: the profile's choice (on in `extended`)."""
    escalation: bool | None = None
    """Warnings carry a `level` (contract §9.13); None: the profile's choice (on in
    `extended`)."""
    escalate_after: int = 2
    """Model calls that see a loop's warning without a change before its level rises."""
    warn_once: bool = False
    """A loop's warning is shown at its first verdict and when its level rises, not at
    every verdict while it goes on (§9.13)."""
    result_ignore: dict[str, tuple[str, ...]] = {}
    """Per tool, more result keys to ignore, and `re:<pattern>` texts to mask (§9.9)."""

    def __init__(self, **data: Any) -> None:
        _check(data)
        if data.get("profile") == "extended":
            given = set(data)
            super().__init__(**{**EXTENDED_DEFAULTS, **data})
            # the profile's defaults count as unset, like any other default
            object.__setattr__(self, "__pydantic_fields_set__", given)
        else:
            super().__init__(**data)

    # Derived once per config (cached_property: plain attribute reads after the first;
    # pydantic leaves them out of equality and dumps). The core reads them per event.

    @cached_property
    def enabled_rules(self) -> tuple[RuleName, ...]:
        """The rules that run, in evaluation order."""
        chosen = PROFILE_RULES[self.profile]
        return tuple(rule for rule in ALL_RULES if self.rules.get(rule, rule in chosen))

    @cached_property
    def batches_compare_results(self) -> bool:
        """Whether `repeated_batch` is result-aware (contract §9.3)."""
        if self.result_aware_batches is None:
            return self.profile == "extended"
        return self.result_aware_batches

    @cached_property
    def escalates(self) -> bool:
        """Warnings carry a level (§9.13)."""
        return self.profile == "extended" if self.escalation is None else self.escalation

    @cached_property
    def result_cleaner(self) -> ResultCleaner | None:
        """The loose result fingerprint's cleaner (§9.9); None: results compare by §3."""
        on = self.profile == "extended" if self.volatile_results is None else self.volatile_results
        return ResultCleaner(self.result_ignore) if on else None

    @cached_property
    def result_mode(self) -> str:
        """How results are compared: "" (§3), else names the cleaning (what a session's
        result-reading state was built with; a change starts it again, §9.9)."""
        if self.result_cleaner is None:
            return ""
        ignore = sorted((tool, sorted(entries)) for tool, entries in self.result_ignore.items())
        return "loose" if not ignore else f"loose:{ignore!r}"

    @cached_property
    def has_tool_policy(self) -> bool:
        """Exempt tools or per-tool thresholds are set (§9.6)."""
        return bool(self.exempt_tools or self.tool_thresholds)

    @cached_property
    def is_seed(self) -> bool:
        """Exactly docs/contract.md §4's rules (thresholds aside): the core's fast path."""
        return (
            self.enabled_rules == RULES
            and not self.batches_compare_results
            and not self.has_tool_policy
            and not self.result_mode
            and not self.escalates
            and not self.warn_once
        )

    @cached_property
    def _exempt(self) -> frozenset[str]:
        return frozenset(self.exempt_tools)

    def rule_threshold(self, rule: RuleName) -> int:
        """The threshold a rule uses when no per-tool threshold applies."""
        value: int = getattr(self, _RULE_THRESHOLD[rule])
        return value

    def threshold_for(self, rule: RuleName, tool_names: tuple[str, ...]) -> int | None:
        """The threshold in force for a match naming `tool_names`; None when every named
        tool is exempt (the match is ignored)."""
        if not self.has_tool_policy:
            return self.rule_threshold(rule)
        if tool_names and all(name in self._exempt for name in tool_names):
            return None
        own = self.tool_thresholds
        if own and tool_names and all(name in own for name in tool_names):
            return max(own[name] for name in tool_names)
        return self.rule_threshold(rule)


def _check(data: Mapping[str, Any]) -> None:
    known = DetectionConfig.model_fields
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"unknown config key {unknown[0]!r}")
    for key in THRESHOLD_KEYS:
        if key in data and not _is_count(data[key]):
            raise ConfigError(f"{key} must be an integer >= 1, got {data[key]!r}")
    if "profile" in data and data["profile"] not in PROFILE_RULES:
        raise ConfigError(f"profile must be one of seed, extended, got {data['profile']!r}")
    aware = data.get("result_aware_batches")
    if aware is not None and not isinstance(aware, bool):
        raise ConfigError(f"result_aware_batches must be true, false or null, got {aware!r}")
    _check_rules(data.get("rules", {}))
    _check_tools(data.get("exempt_tools", ()), data.get("tool_thresholds", {}))
    for key in ("escalation", "warn_once"):
        value = data.get(key)
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
    if "escalate_after" in data and not _is_count(data["escalate_after"]):
        raise ConfigError(f"escalate_after must be an integer >= 1, got {data['escalate_after']!r}")
    volatile = data.get("volatile_results")
    if volatile is not None and not isinstance(volatile, bool):
        raise ConfigError(f"volatile_results must be true, false or null, got {volatile!r}")
    _check_ignore(data.get("result_ignore", {}))


def _is_count(value: Any) -> bool:
    # bool is an int subclass in Python; the contract rejects it explicitly.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_rules(rules: Any) -> None:
    if not isinstance(rules, Mapping):
        raise ConfigError(f"rules must be an object of rule name to true/false, got {rules!r}")
    for rule, on in rules.items():
        if rule not in ALL_RULES:
            raise ConfigError(f"rules: unknown rule {rule!r} (known: {', '.join(ALL_RULES)})")
        if not isinstance(on, bool):
            raise ConfigError(f"rules: {rule} must be true or false, got {on!r}")


def _check_tools(exempt: Any, own: Any) -> None:
    if not isinstance(exempt, list | tuple):
        raise ConfigError(f"exempt_tools must be a list of tool names, got {exempt!r}")
    if not isinstance(own, Mapping):
        raise ConfigError(f"tool_thresholds must be an object of tool name to count, got {own!r}")
    for key, size in (("exempt_tools", len(exempt)), ("tool_thresholds", len(own))):
        if size > MAX_TOOL_ENTRIES:
            raise ConfigError(f"{key} may list at most {MAX_TOOL_ENTRIES} tools, got {size}")
    for name in (*exempt, *own):
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_TOOL_NAME_CHARS:
            raise ConfigError(
                f"tool names must be 1-{MAX_TOOL_NAME_CHARS} characters, got {name!r}"
            )
    for name, value in own.items():
        if not _is_count(value):
            raise ConfigError(f"tool_thresholds: {name} must be an integer >= 1, got {value!r}")


MAX_IGNORE_ENTRIES = 32


def _check_ignore(ignore: Any) -> None:
    if not isinstance(ignore, Mapping):
        raise ConfigError(f"result_ignore must be an object of tool name to a list, got {ignore!r}")
    if len(ignore) > MAX_TOOL_ENTRIES:
        raise ConfigError(f"result_ignore may list at most {MAX_TOOL_ENTRIES} tools")
    for name, entries in ignore.items():
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_TOOL_NAME_CHARS:
            raise ConfigError(
                f"tool names must be 1-{MAX_TOOL_NAME_CHARS} characters, got {name!r}"
            )
        if not isinstance(entries, list | tuple) or len(entries) > MAX_IGNORE_ENTRIES:
            raise ConfigError(
                f"result_ignore: {name} must be a list of at most {MAX_IGNORE_ENTRIES} "
                f"keys or re: patterns, got {entries!r}"
            )
        for entry in entries:
            if not isinstance(entry, str) or not 1 <= len(entry) <= MAX_TOOL_NAME_CHARS:
                raise ConfigError(f"result_ignore: {name}: bad entry {entry!r}")
            if entry.startswith("re:"):
                try:
                    re.compile(entry[3:])
                except re.error as exc:
                    raise ConfigError(
                        f"result_ignore: {name}: bad pattern {entry!r}: {exc}"
                    ) from exc
