"""`first_match`: the first rule a config enables that matches a session's state, with the
policy's exempt tools and per-tool thresholds applied (docs/contract.md §4, §9.6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loopwatch.models import DetectionConfig
from loopwatch.streams.detector.rules import Hit, Rule
from loopwatch.streams.detector.rules.base import Match
from loopwatch.streams.detector.state import SessionState


def first_match(state: SessionState, config: DetectionConfig) -> Match | None:
    """The first rule that `config` enables (of the state's rule set) that matches."""
    parts = state.parts
    if not config.has_tool_policy:
        for check, index, rule in state.rules.for_config(config):
            hit = check(parts[index], config)
            if hit is not None:
                return Match(rule, hit)
        return None
    for check, index, rule in state.rules.for_config(config):
        hit = checked_hit(rule, check, parts[index], config)
        if hit is not None:
            return Match(rule, hit)
    return None


def checked_hit(
    rule: Rule[Any],
    check: Callable[[Any, DetectionConfig], Hit | None],
    part: Any,
    config: DetectionConfig,
) -> Hit | None:
    """A rule's hit under `config`, with exempt tools and per-tool thresholds (§9.6)
    applied after counting for the rules whose check does not apply them itself."""
    if rule.applies_policy or not config.has_tool_policy:
        return check(part, config)
    hit = check(part, _COUNTING)
    if hit is None:
        return None
    limit = config.threshold_for(rule.name, hit.tool_names)
    if limit is None or hit.count < limit:
        return None
    return Hit(hit.tool_names, hit.count, limit, hit.subject)


_COUNTING = DetectionConfig(
    threshold=1,
    mutating_failure_threshold=1,
    call_in_turn_threshold=1,
    cycle_threshold=1,
    error_threshold=1,
    call_floor_threshold=1,
    message_threshold=1,
    condensation_threshold=1,
)
"""Thresholds of 1: a seed rule's check then reports its count whenever its pattern is
there, and the threshold is decided after it (counts never depend on a threshold)."""
