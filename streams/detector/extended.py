"""Evaluation under any profile or policy (docs/contract.md §9.1, §9.6).

Each rule yields a candidate — (tool names, count), independent of thresholds — when its
pattern is there; the first enabled rule whose candidate reaches the threshold in force
(after exemptions and per-tool thresholds) gives the warning. The seed's fast path in
`core.evaluate` gives the same answers for the seed profile without a policy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from models import DetectionConfig, LoopWarning, RuleName
from streams.detector import steps as extended
from streams.detector.texts import WarningTexts
from streams.detector.tools import is_mutating

if TYPE_CHECKING:
    from streams.detector.state import SessionState

Candidate = tuple[tuple[str, ...], int] | None


def _failed_mutation(state: SessionState, config: DetectionConfig) -> Candidate:
    if state.result_signature is None or not state.result_failed:
        return None
    if not is_mutating(state.result_tool):
        return None
    return (state.result_tool,), state.result_run


def _result(state: SessionState, config: DetectionConfig) -> Candidate:
    if state.result_signature is None:
        return None
    return (state.result_tool,), state.result_run


def _read_range(state: SessionState, config: DetectionConfig) -> Candidate:
    if state.chain_tool is None or len(state.chain_ranges) < 2:
        return None
    return (state.chain_tool,), state.chain_top


def _batch(state: SessionState, config: DetectionConfig) -> Candidate:
    if state.batch_digest is None:
        return None
    if config.batches_compare_results:
        return state.batch_tools, state.steps.aware_run
    return state.batch_tools, state.batch_run


def _call_in_turn(state: SessionState, config: DetectionConfig) -> Candidate:
    steps = state.steps
    return (steps.turn_tools, steps.turn_count) if steps.turn_count else None


CANDIDATES: dict[RuleName, Callable[[SessionState, DetectionConfig], Candidate]] = {
    "repeated_failed_mutation": _failed_mutation,
    "repeated_result": _result,
    "repeated_read_range": _read_range,
    "repeated_batch": _batch,
    "repeated_call_in_turn": _call_in_turn,
}


def evaluate_extended(
    state: SessionState, config: DetectionConfig, texts: WarningTexts
) -> LoopWarning | None:
    for rule in config.enabled_rules:
        if rule == "repeated_cycle":
            # Thresholds apply per period (§9.4): the smallest period that reaches its own.
            for _period, names, repetitions in extended.cycles(state.steps):
                limit = config.threshold_for(rule, names)
                if limit is not None and repetitions >= limit:
                    return warning(texts, rule, names, repetitions, limit)
            continue
        candidate = CANDIDATES[rule](state, config)
        if candidate is None:
            continue
        names, count = candidate
        limit = config.threshold_for(rule, names)
        if limit is not None and count >= limit:
            return warning(texts, rule, names, count, limit)
    return None


def warning(
    texts: WarningTexts,
    rule: RuleName,
    tool_names: tuple[str, ...],
    count: int,
    threshold: int,
) -> LoopWarning:
    return LoopWarning(
        rule=rule,
        tool_names=tool_names,
        count=count,
        threshold=threshold,
        message=texts.render(rule, tool_names, count, threshold),
    )
