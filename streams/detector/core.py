"""`observe`: the pure, incremental detector (SPEC §4).

Each event updates a few digests and counters, then the four rules are read off them in
order. Work per event is O(size of the event), independent of the session's length.
"""

from __future__ import annotations

from datetime import datetime

from models import (
    AgentEvent,
    AssistantMessage,
    DetectionConfig,
    LoopVerdict,
    LoopWarning,
    PolicyRef,
    SessionEnd,
    SystemMessage,
    ToolResult,
    UserMessage,
    call_fingerprint,
    result_fingerprint,
)
from streams.detector import steps as extended
from streams.detector.extended import evaluate_extended, warning
from streams.detector.state import MAX_CHAIN_RANGES, MAX_REMEMBERED_CALLS, SessionState
from streams.detector.texts import DEFAULT_TEXTS, WarningTexts
from streams.detector.tools import is_mutating, read_range, read_resource, short_digest

_FINGERPRINT_HEX_START = len("sha256:")


def _fingerprint_digest(fingerprint: str) -> str:
    # 128 bits of the digest are plenty for equality tests and halve the state size.
    return fingerprint[_FINGERPRINT_HEX_START : _FINGERPRINT_HEX_START + 32]


def observe(
    state: SessionState | None,
    event: AgentEvent,
    config: DetectionConfig,
    *,
    evaluated_at: datetime | None = None,
    texts: WarningTexts = DEFAULT_TEXTS,
    policy: PolicyRef | None = None,
) -> tuple[SessionState | None, LoopVerdict | None]:
    """Apply one event to a session's state and evaluate the rules.

    Returns the new state (None after `session_end`: the state is dropped) and the
    event's verdict. An event whose `seq` is not above the last processed one is a
    duplicate or out of order: the state comes back unchanged and there is no verdict.
    `evaluated_at` defaults to the event's own time (the core reads no clock).
    `policy`: the policy record whose config this is, named in the verdict (contract §9.8).
    The input state is never modified.
    """
    if state is not None and event.seq <= state.last_seq:
        return state, None
    new = _advance(state, event)
    verdict = LoopVerdict(
        session_id=event.session_id,
        seq=event.seq,
        agent_id=event.agent_id,
        event_ts=event.ts,
        evaluated_at=evaluated_at or event.ts,
        warning=evaluate(new, config, texts),
        policy=policy,
    )
    return (None if isinstance(event, SessionEnd) else new), verdict


def _advance(state: SessionState | None, event: AgentEvent) -> SessionState:
    if state is None:
        new = SessionState(last_seq=event.seq, last_ts=event.ts)
    else:
        new = state.copy()
        new.last_seq = event.seq
        new.last_ts = event.ts
    if isinstance(event, UserMessage | SystemMessage):
        _on_boundary(new)
    elif isinstance(event, AssistantMessage):
        if event.tool_calls:
            _on_tool_step(new, event)
        else:
            _on_text_step(new)
    elif isinstance(event, ToolResult):
        _on_result(new, event)
    return new


def _clear_chain(state: SessionState) -> None:
    state.chain_tool = None
    state.chain_target = ""
    state.chain_full = False
    state.chain_ranges = {}
    state.chain_top = 0


def _on_boundary(state: SessionState) -> None:
    # Results since the latest boundary start afresh; batches run across boundaries.
    state.result_signature = None
    state.result_run = 0
    state.result_failed = False
    state.result_tool = ""
    _clear_chain(state)
    state.steps = extended.on_boundary(state.steps)


def _on_text_step(state: SessionState) -> None:
    _clear_chain(state)
    state.batch_digest = None
    state.batch_run = 0
    state.batch_tools = ()
    state.steps = extended.on_text_step(state.steps)


def _on_tool_step(state: SessionState, event: AssistantMessage) -> None:
    fingerprints = []
    ids = []
    calls = dict(state.calls)
    for call in event.tool_calls:
        digest = _fingerprint_digest(
            call.fingerprint or call_fingerprint(call.name, call.arguments)
        )
        fingerprints.append(digest)
        key = short_digest(call.id)
        ids.append(key)
        calls.pop(key, None)  # re-inserted at the end: the newest call with an id wins
        calls[key] = digest
    while len(calls) > MAX_REMEMBERED_CALLS:
        del calls[next(iter(calls))]
    state.calls = calls

    batch = short_digest(",".join(sorted(fingerprints)))
    continues = batch == state.batch_digest
    state.batch_run = state.batch_run + 1 if continues else 1
    state.batch_digest = batch
    names = tuple(call.name for call in event.tool_calls)
    state.batch_tools = tuple(sorted(set(names)))
    state.steps = extended.on_tool_step(
        state.steps,
        batch=batch,
        id_digests=ids,
        fingerprints=fingerprints,
        names=names,
        tools=state.batch_tools,
        continues=continues,
    )

    _extend_chain(state, event)


def _extend_chain(state: SessionState, event: AssistantMessage) -> None:
    first = event.tool_calls[0]
    resource = read_resource(first.name, first.arguments)
    if resource is None:
        _clear_chain(state)
        return
    ranges: list[str] = []
    for call in event.tool_calls:
        if call is not first and read_resource(call.name, call.arguments) != resource:
            break
        ranges.append(read_range(call.arguments))
    target = short_digest(resource)
    full = len(ranges) == len(event.tool_calls)
    # The chain reaches back into the previous tool step only when this step read the
    # target and nothing else; that step's own chain already says how far it reaches.
    continues = full and state.chain_tool is not None and state.chain_target == target
    counts = dict(state.chain_ranges) if continues else {}
    top = state.chain_top if continues else 0
    for key in ranges:
        if key in counts:
            counts[key] += 1
        elif len(counts) < MAX_CHAIN_RANGES:
            counts[key] = 1
        else:
            continue
        top = max(top, counts[key])
    state.chain_tool = first.name
    state.chain_target = target
    state.chain_full = full
    state.chain_ranges = counts
    state.chain_top = top


def _on_result(state: SessionState, event: ToolResult) -> None:
    call: str | None
    id_digest = short_digest(event.call_id)
    if event.call_fingerprint is not None:
        call = _fingerprint_digest(event.call_fingerprint)
    else:
        call = state.calls.get(id_digest)
    state.result_failed = event.error is not None
    state.result_tool = event.tool_name
    if call is None:
        # An unresolvable call: no signature, matches nothing, ends any run.
        state.result_signature = None
        state.result_run = 0
        state.steps = extended.on_result(state.steps, id_digest, None)
        return
    result = _fingerprint_digest(
        event.result_fingerprint or result_fingerprint(event.tool_name, event.result, event.error)
    )
    signature = f"{call}:{result}"
    state.result_run = state.result_run + 1 if signature == state.result_signature else 1
    state.result_signature = signature
    state.steps = extended.on_result(state.steps, id_digest, signature)


def evaluate(
    state: SessionState, config: DetectionConfig, texts: WarningTexts = DEFAULT_TEXTS
) -> LoopWarning | None:
    """The first enabled rule that matches the state, as a warning (SPEC §4; with another
    profile or policy, contract §9)."""
    if not config.is_seed:
        return evaluate_extended(state, config, texts)
    if state.result_signature is not None:
        run = state.result_run
        limit = config.mutating_failure_threshold
        if state.result_failed and is_mutating(state.result_tool) and run >= limit:
            return warning(texts, "repeated_failed_mutation", (state.result_tool,), run, limit)
        if run >= config.threshold:
            return warning(texts, "repeated_result", (state.result_tool,), run, config.threshold)
    if (
        state.chain_tool is not None
        and state.chain_top >= config.threshold
        and len(state.chain_ranges) >= 2
    ):
        return warning(
            texts, "repeated_read_range", (state.chain_tool,), state.chain_top, config.threshold
        )
    if state.batch_digest is not None and state.batch_run >= config.threshold:
        return warning(
            texts, "repeated_batch", state.batch_tools, state.batch_run, config.threshold
        )
    return None
