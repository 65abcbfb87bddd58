"""The rules of docs/contract.md §4 and §9, one module each, and their order.

A new rule is one new module (a `Rule`, with its own `Tracker` or one it shares) plus
one line in `SEED_ORDER`. See `base` for the protocol and docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from loopwatch.models import DetectionConfig, RuleName
from loopwatch.streams.detector.rules import (
    recurring_result,
    repeated_batch,
    repeated_batch_outcomes,
    repeated_call,
    repeated_call_in_turn,
    repeated_condensation,
    repeated_cycle,
    repeated_error,
    repeated_failed_mutation,
    repeated_message,
    repeated_read_range,
    repeated_result,
)
from loopwatch.streams.detector.rules.base import Hit, Match, Rule, Tracker

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
    repeated_error.RULE,
    recurring_result.RULE,
    repeated_call.RULE,
    repeated_message.RULE,
    repeated_condensation.RULE,
)
"""The `extended` profile in evaluation order (docs/contract.md §9.1); a config may switch
rules on and off, and rule 4 back to its calls-only form, without reordering."""

Check = tuple[Callable[..., Any], int, Rule[Any]]


class RuleSet:
    """Rules in evaluation order, with their distinct trackers (the state's parts, in
    order of first use) and, per kind of event, the tracker hooks to call."""

    def __init__(self, rules: Sequence[Rule[Any]], *, within: RuleSet | None = None) -> None:
        self.rules = tuple(rules)
        self.family: RuleSet = self if within is None else within.family
        """The set this one keeps a part of (`kept_for`); itself for a set built directly."""
        self.names: tuple[RuleName, ...] = (
            tuple(dict.fromkeys(rule.name for rule in self.rules))
            if within is None
            else within.family.names
        )
        """The rules' names in evaluation order (once each: rule 4 has two forms); for a
        kept part of a set, the whole set's (episodes of any of them stay in order)."""
        trackers: list[Tracker[Any]] = []
        for rule in self.rules:
            if rule.tracker not in trackers:
                trackers.append(rule.tracker)
        self.trackers = tuple(trackers)
        self.checks = tuple((rule.check, trackers.index(rule.tracker), rule) for rule in self.rules)
        """(check, index of its tracker's part, rule) in evaluation order."""
        self._empty = tuple(tracker.empty() for tracker in self.trackers)
        self.on_boundary = self._hooks("on_boundary")
        self.on_user_message = self._hooks("on_user_message")
        self.on_text_step = self._hooks("on_text_step")
        self.on_text = self._hooks("on_text")
        self.on_condensed = self._hooks("on_condensed")
        self.on_tool_step = self._hooks("on_tool_step")
        self.on_result = self._hooks("on_result")
        self._selected: dict[tuple[tuple[RuleName, ...], bool], tuple[Check, ...]] = {}
        self._last: tuple[DetectionConfig, tuple[Check, ...]] | None = None
        self._parts: dict[frozenset[str], RuleSet] = {}
        self._kept: dict[tuple[tuple[RuleName, ...], bool], RuleSet] = {}
        self._last_kept: tuple[DetectionConfig, RuleSet] | None = None

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

    def kept_for(self, config: DetectionConfig) -> RuleSet:
        """The part of this set a session judged by `config` keeps (docs/contract.md §9.1):
        the rules whose tracker one of the checks `config` enables reads. The others'
        trackers are neither updated nor stored, so rules a config does not run cost
        nothing; the same config gives the same set object."""
        last = self._last_kept
        if last is not None and last[0] is config:
            return last[1]
        key = (config.enabled_rules, config.batches_compare_results)
        kept = self._kept.get(key)
        if kept is None:
            kept = self._kept[key] = self.keeping(
                {check[2].tracker for check in self.for_config(config)}
            )
        self._last_kept = (config, kept)
        return kept

    def keeping(self, trackers: Collection[Tracker[Any]]) -> RuleSet:
        """This set's rules whose tracker is one of `trackers` (this set itself when that
        is all of them; the same set object for the same trackers)."""
        keys = frozenset(tracker.key for tracker in self.trackers if tracker in trackers)
        if len(keys) == len(self.trackers):
            return self
        kept = self._parts.get(keys)
        if kept is None:
            rules = [rule for rule in self.rules if rule.tracker.key in keys]
            kept = self._parts[keys] = RuleSet(rules, within=self)
        return kept

    def _wanted(self, rule: Rule[Any], config: DetectionConfig) -> bool:
        if rule.name not in config.enabled_rules:
            return False
        # Rule 4 has two forms: the config chooses one.
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


ALL_RULES = RuleSet((*SEED_ORDER, *EXTENDED_ORDER[3:]))
"""Every rule and tracker. A session keeps the part of it that the config judging its
events runs (`kept_for`, docs/contract.md §9.1)."""

SEED_RULES = ALL_RULES.kept_for(DetectionConfig())
"""What a session judged by the `seed` profile keeps: `SEED_ORDER`, and its trackers."""

__all__ = [
    "ALL_RULES",
    "EXTENDED_ORDER",
    "SEED_ORDER",
    "SEED_RULES",
    "Hit",
    "Match",
    "Rule",
    "RuleSet",
    "Tracker",
]
