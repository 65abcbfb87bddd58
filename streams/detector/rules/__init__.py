"""The rules of SPEC §4 and docs/contract.md §9, one module each, and their order.

A new rule is one new module (a `Rule`, with its own `Tracker` or one it shares) plus
one line in `SEED_ORDER`. See `base` for the protocol and docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from loopwatch.models import DetectionConfig, RuleName
from loopwatch.streams.detector.rules import (
    repeated_batch,
    repeated_batch_outcomes,
    repeated_call_in_turn,
    repeated_cycle,
    repeated_failed_mutation,
    repeated_read_range,
    repeated_result,
)
from loopwatch.streams.detector.rules.base import Hit, Rule, Tracker

SEED_ORDER: tuple[Rule[Any], ...] = (
    repeated_failed_mutation.RULE,
    repeated_result.RULE,
    repeated_read_range.RULE,
    repeated_batch.RULE,
)
"""The `seed` profile in evaluation order: the first rule that matches gives the warning."""

EXTENDED_ORDER: tuple[Rule[Any], ...] = (
    repeated_failed_mutation.RULE,
    repeated_result.RULE,
    repeated_read_range.RULE,
    repeated_batch_outcomes.RULE,
    repeated_call_in_turn.RULE,
    repeated_cycle.RULE,
)
"""The `extended` profile in evaluation order (docs/contract.md §9.1); a config may switch
rules on and off, and rule 4 back to its calls-only form, without reordering."""

Check = tuple[Callable[..., Any], int, Rule[Any]]


class RuleSet:
    """Rules in evaluation order, with their distinct trackers (the state's parts, in
    order of first use) and, per kind of event, the tracker hooks to call."""

    def __init__(self, rules: Sequence[Rule[Any]]) -> None:
        self.rules = tuple(rules)
        self.names = tuple(dict.fromkeys(rule.name for rule in self.rules))
        """The rules' names in evaluation order (once each: rule 4 has two forms)."""
        trackers: list[Tracker[Any]] = []
        for rule in self.rules:
            if rule.tracker not in trackers:
                trackers.append(rule.tracker)
        self.trackers = tuple(trackers)
        self.checks = tuple((rule.check, trackers.index(rule.tracker), rule) for rule in self.rules)
        """(check, index of its tracker's part, rule) in evaluation order."""
        self._empty = tuple(tracker.empty() for tracker in self.trackers)
        self.on_boundary = self._hooks("on_boundary")
        self.on_text_step = self._hooks("on_text_step")
        self.on_tool_step = self._hooks("on_tool_step")
        self.on_result = self._hooks("on_result")
        self._selected: dict[tuple[tuple[RuleName, ...], bool], tuple[Check, ...]] = {}
        self._last: tuple[DetectionConfig, tuple[Check, ...]] | None = None

    def for_config(self, config: DetectionConfig) -> tuple[Check, ...]:
        """The checks a config enables, in evaluation order (only this set's rules)."""
        last = self._last
        if last is not None and last[0] is config:
            return last[1]
        key = (config.enabled_rules, config.batches_compare_results)
        checks = self._selected.get(key)
        if checks is None:
            checks = tuple(check for check in self.checks if self._wanted(check[2], config))
            self._selected[key] = checks
        self._last = (config, checks)
        return checks

    def _wanted(self, rule: Rule[Any], config: DetectionConfig) -> bool:
        if rule.name not in config.enabled_rules:
            return False
        # Rule 4 has two forms; a set holding both runs the one the config asks for.
        if repeated_batch_outcomes.RULE in self.rules:
            if rule is repeated_batch_outcomes.RULE:
                return config.batches_compare_results
            if rule is repeated_batch.RULE:
                return not config.batches_compare_results
        return True

    def empty_parts(self) -> list[Any]:
        """The parts of a new session (parts are immutable: shared empties are safe)."""
        return list(self._empty)

    def _hooks(self, hook: str) -> tuple[tuple[int, Callable[..., Any]], ...]:
        return tuple(
            (index, getattr(tracker, hook))
            for index, tracker in enumerate(self.trackers)
            if tracker.handles(hook)
        )


SEED_RULES = RuleSet(SEED_ORDER)

ALL_RULES = RuleSet((*SEED_ORDER, *EXTENDED_ORDER[3:]))
"""Every rule and tracker: the set a session's state is kept for, so that any profile or
policy can judge its next event (docs/contract.md §9.1)."""

__all__ = [
    "ALL_RULES",
    "EXTENDED_ORDER",
    "SEED_ORDER",
    "SEED_RULES",
    "Hit",
    "Rule",
    "RuleSet",
    "Tracker",
]
