"""The rules of SPEC §4, one module each, and their evaluation order.

A new rule is one new module (a `Rule`, with its own `Tracker` or one it shares) plus
one line in `SEED_ORDER`. See `base` for the protocol and docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streams.detector.rules import (
    repeated_batch,
    repeated_failed_mutation,
    repeated_read_range,
    repeated_result,
)
from streams.detector.rules.base import Hit, Rule, Tracker

SEED_ORDER: tuple[Rule[Any], ...] = (
    repeated_failed_mutation.RULE,
    repeated_result.RULE,
    repeated_read_range.RULE,
    repeated_batch.RULE,
)
"""The `seed` profile in evaluation order: the first rule that matches gives the warning."""


class RuleSet:
    """Rules in evaluation order, with their distinct trackers (the state's parts, in
    order of first use) and, per kind of event, the tracker hooks to call."""

    def __init__(self, rules: Sequence[Rule[Any]]) -> None:
        self.rules = tuple(rules)
        self.names = tuple(rule.name for rule in self.rules)
        """The rules' names in evaluation order."""
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

__all__ = ["SEED_ORDER", "SEED_RULES", "Hit", "Rule", "RuleSet", "Tracker"]
