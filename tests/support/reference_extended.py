"""A straightforward reading of docs/contract.md §9 (profiles, rules 5 and 6, result-aware
batches, exempt tools, per-tool thresholds), for checking the core.

Like tests/support/reference.py (whose docs/contract.md §3-§4 helpers it reuses), it
re-scans the whole history of one session at every call and keeps nothing between calls.
Written from the contract section alone, not from the core. Where the text leaves room,
`READING:` says which way this module reads it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loopwatch.models import (
    AgentEvent,
    AssistantMessage,
    DetectionConfig,
    ToolResult,
    result_fingerprint,
    text_fingerprint,
)
from loopwatch.models.volatile import (
    ERROR_DETAIL,
    MASKED_EDGE,
    UUID,
    VOLATILE_KEYS,
    VOLATILE_TEXT,
)
from tests.support import reference
from tests.support.reference import ExpectedWarning, is_boundary, is_text_step, is_tool_step

SEED_ORDER = (
    "repeated_failed_mutation",
    "repeated_result",
    "repeated_read_range",
    "repeated_batch",
)
ALL_ORDER = (
    *SEED_ORDER,
    "repeated_call_in_turn",
    "repeated_cycle",
    "repeated_error",
    "recurring_result",
    "repeated_call",
    "repeated_message",
    "repeated_condensation",
)
WINDOW = 10
"""recurring_result's window of signed results (§9.11)."""
MAX_STEP_IDS = 64
"""A step with more distinct call ids has an unknown outcome (§9.1)."""

Candidate = tuple[tuple[str, ...], int]
"""(tool_names, count) of a rule whose pattern is there, before any threshold."""


class _Unknown:
    """An unknown outcome: equal to nothing, itself included."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


# --- outcomes, completion and units (§9.1) -------------------------------------------


def _assistant_indexes(history: Sequence[AgentEvent]) -> list[int]:
    return [i for i, e in enumerate(history) if isinstance(e, AssistantMessage)]


def _ids(step: AssistantMessage) -> set[str]:
    return {call.id for call in step.tool_calls}


def _signature_text(sig: str | None) -> str:
    return "" if sig is None else sig  # "no signature" is one value


def outcome(history: Sequence[AgentEvent], index: int) -> object:
    """The outcome of the tool step at `index`: the sorted signatures of the results after
    it, before the next assistant message, answering one of its call ids."""
    step = history[index]
    assert isinstance(step, AssistantMessage)
    ids = _ids(step)
    if len(ids) > MAX_STEP_IDS:
        return _Unknown()
    sigs = reference.signatures(history)
    found: list[str] = []
    for j in range(index + 1, len(history)):
        event = history[j]
        if isinstance(event, AssistantMessage):
            break
        if isinstance(event, ToolResult) and event.call_id in ids:
            found.append(_signature_text(sigs[j]))
    return tuple(sorted(found))


@dataclass(frozen=True)
class Unit:
    batch: tuple[str, ...]
    results: tuple[str, ...]
    names: frozenset[str]


def completed_units(history: Sequence[AgentEvent]) -> list[Unit]:
    """S of §9.4: units of the steps issued since the latest boundary that completed, in
    completion order, emptied by an abandoned step."""
    sigs = reference.signatures(history)
    units: list[Unit] = []
    pending: AssistantMessage | None = None
    answered: set[str] = set()
    found: list[str] = []
    for j, event in enumerate(history):
        if is_boundary(event):
            units, pending = [], None
        elif isinstance(event, AssistantMessage):
            if pending is not None:  # abandoned before it completed
                units = []
            pending = event if is_tool_step(event) else None
            answered, found = set(), []
        elif isinstance(event, ToolResult) and pending is not None:
            ids = _ids(pending)
            if event.call_id in ids:
                answered.add(event.call_id)
                found.append(_signature_text(sigs[j]))
                if len(ids) <= MAX_STEP_IDS and answered == ids:
                    units.append(
                        Unit(
                            tuple(reference.batch_of(pending)),
                            tuple(sorted(found)),
                            frozenset(call.name for call in pending.tool_calls),
                        )
                    )
                    pending = None
    return units


# --- rule candidates ---------------------------------------------------------------------


def failed_mutation(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    run = reference.result_run(history)
    if run is None:
        return None
    newest, count = run
    if newest.error is None or not reference.is_mutating_tool(newest.tool_name):
        return None
    return (newest.tool_name,), count


def same_result(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    run = reference.result_run(history)
    return None if run is None else ((run[0].tool_name,), run[1])


def read_range(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    chain = reference.tool_chain(history)
    if not chain:
        return None
    target = reference.read_resource(chain[0].tool_calls[0])
    if target is None:
        return None
    ranges: Counter[str] = Counter()
    for step in chain:
        whole = True
        for call in step.tool_calls:
            if reference.read_resource(call) != target:
                whole = False
                break
            ranges[reference.read_range(call)] += 1
        if not whole:
            break
    return ((target[0],), max(ranges.values())) if len(ranges) >= 2 else None


def batch(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    steps = _assistant_indexes(history)
    if _result_aware(config):  # a user message is new intent: the run starts after it
        steps = [i for i in steps if i > _latest_user(history)]
    if not steps or is_text_step(history[steps[-1]]):
        return None
    newest = history[steps[-1]]
    assert isinstance(newest, AssistantMessage)
    same = reference.batch_of(newest)
    run: list[int] = []  # indexes, newest first
    for i in reversed(steps):
        step = history[i]
        assert isinstance(step, AssistantMessage)
        if is_text_step(step) or reference.batch_of(step) != same:
            break
        run.append(i)
    count = len(run)
    if _result_aware(config) and count > 1:
        # Going back from M_{c-1}: keep the steps whose outcome equals M_{c-1}'s.
        last = outcome(history, run[1])
        kept = 0
        for i in run[1:]:
            if outcome(history, i) != last:
                break
            kept += 1
        count = 1 + kept
    return tuple(sorted({call.name for call in newest.tool_calls})), count


def call_in_turn(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    for event in reversed(history):
        if is_boundary(event):
            return None
        if isinstance(event, AssistantMessage):
            if not event.tool_calls:
                return None
            fps = Counter(reference.fingerprint_of_call(call) for call in event.tool_calls)
            top = max(fps.values())
            names = {
                call.name
                for call in event.tool_calls
                if fps[reference.fingerprint_of_call(call)] == top
            }
            return tuple(sorted(names)), top
    return None


def cycle(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    units = completed_units(history)
    n = len(units)
    for period in range(2, 6):
        if n < period:
            break
        last = units[n - period :]
        if all(u == last[0] for u in last):
            continue
        tail = 0
        for p in range(n, 0, -1):  # the longest L-periodic suffix
            if all(units[i] == units[i - period] for i in range(n - p + period, n)):
                tail = p
                break
        names = tuple(sorted(set().union(*(u.names for u in last))))
        # Exemption and per-tool thresholds apply per period (§9.4, §9.6).
        threshold = threshold_in_force(config, "repeated_cycle", names)
        if threshold is not None and tail // period >= threshold:
            return names, tail // period
    return None


def _latest_user(history: Sequence[AgentEvent]) -> int:
    users = [i for i, e in enumerate(history) if e.type == "user_message"]
    return users[-1] if users else -1


def _since_boundary(history: Sequence[AgentEvent]) -> int:
    bounds = [i for i, e in enumerate(history) if is_boundary(e)]
    return bounds[-1] + 1 if bounds else 0


def same_error(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    """§9.10: the newest results in a row since the boundary that failed, from the newest
    one's tool, with its error class."""
    results = [e for e in history[_since_boundary(history) :] if isinstance(e, ToolResult)]
    if not results or results[-1].error is None:
        return None

    def kind(event: ToolResult) -> tuple[str, str] | None:
        if event.error is None:
            return None
        masked = error_kind(event.error)
        return event.tool_name, masked

    newest = kind(results[-1])
    count = 0
    for event in reversed(results):
        if kind(event) != newest:
            break
        count += 1
    return (results[-1].tool_name,), count


def recurring(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    """§9.11: the newest result's signature among the last WINDOW signed results since
    the boundary."""
    sigs = reference.signatures(history)
    start = _since_boundary(history)
    indexes = [i for i in range(start, len(history)) if isinstance(history[i], ToolResult)]
    if not indexes or sigs[indexes[-1]] is None:
        return None
    window = [sigs[i] for i in indexes if sigs[i] is not None][-WINDOW:]
    newest = history[indexes[-1]]
    assert isinstance(newest, ToolResult)
    return (newest.tool_name,), window.count(window[-1])


def calls_floor(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    """§9.12: the newest tool steps in a row with the same batch since the latest user
    message, whatever their results."""
    steps = [i for i in _assistant_indexes(history) if i > _latest_user(history)]
    if not steps or is_text_step(history[steps[-1]]):
        return None
    newest = history[steps[-1]]
    assert isinstance(newest, AssistantMessage)
    same = reference.batch_of(newest)
    count = 0
    for i in reversed(steps):
        step = history[i]
        assert isinstance(step, AssistantMessage)
        if is_text_step(step) or reference.batch_of(step) != same:
            break
        count += 1
    return tuple(sorted({call.name for call in newest.tool_calls})), count


def _text_of(step: AssistantMessage) -> str | None:
    """§9.14: the text's fingerprint, the carried one first; None when the step has
    neither (it equals nothing)."""
    if step.text_fingerprint is not None:
        return step.text_fingerprint
    return None if step.text is None else text_fingerprint(step.text)


def same_message(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    """§9.14: the newest text steps in a row with the same text since the latest user
    message; a tool step ends the run, other events between do not."""
    steps = [i for i in _assistant_indexes(history) if i > _latest_user(history)]
    if not steps:
        return None
    newest = history[steps[-1]]
    assert isinstance(newest, AssistantMessage)
    text = _text_of(newest)
    if is_tool_step(newest) or text is None:
        return None
    count = 0
    for i in reversed(steps):
        step = history[i]
        assert isinstance(step, AssistantMessage)
        if is_tool_step(step) or _text_of(step) != text:
            break
        count += 1
    return (), count


def condensations(history: Sequence[AgentEvent], config: DetectionConfig) -> Candidate | None:
    """§9.15: the `context_condensed` events after the latest user message and the
    latest assistant message."""
    start = max([_latest_user(history), *_assistant_indexes(history)], default=-1)
    count = sum(1 for e in history[start + 1 :] if e.type == "context_condensed")
    return ((), count) if count else None


CANDIDATES = {
    "repeated_failed_mutation": failed_mutation,
    "repeated_result": same_result,
    "repeated_read_range": read_range,
    "repeated_batch": batch,
    "repeated_call_in_turn": call_in_turn,
    "repeated_cycle": cycle,
    "repeated_error": same_error,
    "recurring_result": recurring,
    "repeated_call": calls_floor,
    "repeated_message": same_message,
    "repeated_condensation": condensations,
}


# --- profiles and policy (§9.1, §9.6) ----------------------------------------------------


def enabled(config: DetectionConfig) -> list[str]:
    chosen = SEED_ORDER if config.profile == "seed" else ALL_ORDER
    switched = {str(rule): on for rule, on in config.rules.items()}
    return [rule for rule in ALL_ORDER if switched.get(rule, rule in chosen)]


def _result_aware(config: DetectionConfig) -> bool:
    if config.result_aware_batches is None:
        return config.profile == "extended"
    return config.result_aware_batches


def _rule_threshold(config: DetectionConfig, rule: str) -> int:
    return {
        "repeated_failed_mutation": config.mutating_failure_threshold,
        "repeated_call_in_turn": config.call_in_turn_threshold,
        "repeated_cycle": config.cycle_threshold,
        "repeated_error": config.error_threshold,
        "repeated_call": config.call_floor_threshold,
        "repeated_message": config.message_threshold,
        "repeated_condensation": config.condensation_threshold,
    }.get(rule, config.threshold)


def threshold_in_force(config: DetectionConfig, rule: str, names: tuple[str, ...]) -> int | None:
    if names and all(name in config.exempt_tools for name in names):
        return None
    if names and all(name in config.tool_thresholds for name in names):
        return max(config.tool_thresholds[name] for name in names)
    return _rule_threshold(config, rule)


# --- volatile fields (§9.9) -------------------------------------------------------------


def loose(config: DetectionConfig) -> bool:
    if config.volatile_results is None:
        return config.profile == "extended"
    return config.volatile_results


def _mode(config: DetectionConfig) -> str:
    if not loose(config):
        return ""
    return "loose " + repr(sorted((t, sorted(e)) for t, e in config.result_ignore.items()))


def _edges(text: str, mask: Any) -> str:
    """§9.9: a string over 2 * MASKED_EDGE characters is masked at its two ends only."""
    if len(text) <= 2 * MASKED_EDGE:
        return str(mask(text))
    head, middle, tail = text[:MASKED_EDGE], text[MASKED_EDGE:-MASKED_EDGE], text[-MASKED_EDGE:]
    return str(mask(head)) + middle + str(mask(tail))


def _volatile(text: str) -> str:
    return VOLATILE_TEXT.sub("<v>", UUID.sub("<v>", text))


def error_kind(error: str) -> str:
    return _edges(error, lambda part: ERROR_DETAIL.sub("<x>", _volatile(part)))


def _mask(text: str, tool_patterns: list[str]) -> str:
    text = _edges(text, _volatile)
    if tool_patterns:  # READING: the tool's patterns as one alternation, left to right
        text = re.sub("|".join(f"(?:{p})" for p in tool_patterns), "<v>", text)
    return text


def _cleaned(value: Any, keys: set[str], patterns: list[str]) -> Any:
    if isinstance(value, str):
        return _mask(value, patterns)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            folded = key.lower().replace("_", "").replace("-", "")
            moment = key[-2:] == "At" or key[-3:] in ("_at", "-at")
            if folded in VOLATILE_KEYS or moment or key in keys:
                continue
            out[key] = _cleaned(item, keys, patterns)
        return out
    if isinstance(value, list):
        return [_cleaned(item, keys, patterns) for item in value]
    return value


def loose_result_fingerprint(config: DetectionConfig, event: ToolResult) -> str:
    entries = config.result_ignore.get(event.tool_name, ())
    keys = {e for e in entries if not e.startswith("re:")}
    patterns = [e[3:] for e in entries if e.startswith("re:")]
    error = event.error
    if error is not None:
        error = error_kind(error)
    return result_fingerprint(event.tool_name, _cleaned(event.result, keys, patterns), error)


# --- which events each rule sees (§9.1: state kept only while a rule reads it) -------


def state_of(rule: str, config: DetectionConfig) -> str:
    """The state a rule reads: rules 1-2 share the run of results, rules 5, 6 and the
    result-aware rule 4 the tool-step state."""
    mode = _mode(config)  # a state reading results starts again when their comparison changes
    if rule == "repeated_batch":
        return "steps" + mode if _result_aware(config) else "batch"
    return {
        "repeated_failed_mutation": "result" + mode,
        "repeated_result": "result" + mode,
        "repeated_read_range": "chain",
        "repeated_error": "errors",
        "recurring_result": "window" + mode,
        "repeated_call": "call_run",
        "repeated_message": "messages",
        "repeated_condensation": "condensations",
    }.get(rule, "steps" + mode)


class KeptSince:
    """Where each state's view of a session begins: at the first event of the newest run
    of events judged by configs that run a rule reading it (§9.1)."""

    def __init__(self) -> None:
        self.since: dict[str, int] = {}

    def judge(self, index: int, config: DetectionConfig) -> dict[str, int]:
        """The event at `index` of the session's history is judged by `config`."""
        kept = {state_of(rule, config) for rule in enabled(config)}
        self.since = {state: self.since.get(state, index) for state in kept}
        return self.since


def view(
    history: Sequence[AgentEvent], start: int, config: DetectionConfig | None = None
) -> list[AgentEvent]:
    """The session as a state kept from event `start` on sees it: the events from there,
    each tool result resolved to its call over the whole session (§9.1), and with its
    loose result fingerprint when `config` compares results so (§9.9)."""
    if config is not None and loose(config):
        history = [
            e.model_copy(update={"result_fingerprint": loose_result_fingerprint(config, e)})
            if isinstance(e, ToolResult) and e.result_fingerprint is None
            else e
            for e in history
        ]
    if start == 0:
        return list(history)
    calls: dict[str, str] = {}
    for event in history[:start]:
        if isinstance(event, AssistantMessage):
            for call in event.tool_calls:
                calls[call.id] = reference.fingerprint_of_call(call)
    out: list[AgentEvent] = []
    for event in history[start:]:
        if isinstance(event, AssistantMessage):
            for call in event.tool_calls:
                calls.pop(call.id, None)  # resolved within the view from here on
        elif isinstance(event, ToolResult) and event.call_fingerprint is None:
            found = calls.get(event.call_id)
            if found is not None:
                out.append(event.model_copy(update={"call_fingerprint": found}))
                continue
        out.append(event)
    return out


def expected_warning(
    history: Sequence[AgentEvent],
    config: DetectionConfig,
    since: Mapping[str, int] | None = None,
) -> ExpectedWarning | None:
    """The warning contract §9 gives to the last event of `history`; `since`: where each
    state's view begins (`KeptSince`), from the first event when not given."""
    for rule in enabled(config):
        start = 0 if since is None else since.get(state_of(rule, config), 0)
        candidate = CANDIDATES[rule](view(history, start, config), config)
        if candidate is None:
            continue
        names, count = candidate
        threshold = threshold_in_force(config, rule, names)
        if threshold is not None and count >= threshold:
            return ExpectedWarning(rule, names, count, threshold)
    return None


class ReplaySession(reference.ReplaySession):
    """tests/support/reference.py's replay, judged by §9 instead of docs/contract.md §4 alone."""

    def judge(self) -> ExpectedWarning | None:
        return expected_warning(self.history, self.config)
