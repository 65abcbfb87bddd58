"""A straightforward, non-incremental reading of docs/contract.md §3-§4: the tests' oracle
for the core and the benches' baseline.

`expected_warning(history, config)` re-scans the whole history of one session (the
processed events only: duplicates and out-of-order `seq` already dropped, nothing from
before a `session_end`) and returns the warning that docs/contract.md §4 gives to its *last* event.
It keeps no state between calls and is O(n) per call on purpose: it is the obvious
"history replay" that the incremental core in `streams/detector` must agree with
(tests/reference.py and the property tests), and the baseline that
`ops/bench/scan_bench.py` compares against (`ReplaySession`).

Written from the spec alone, without reading the core. Where the spec leaves room, this
module takes the most literal reading; each such place is marked `READING:`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loopwatch.models import (
    AgentEvent,
    AssistantMessage,
    DetectionConfig,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    call_fingerprint,
    result_fingerprint,
)

MUTATING_TOOLS = ("edit_file", "write_file", "delete_file", "bash")
READ_FILE_TOOLS = ("read_file",)
READ_MANY_TOOLS = ("read_many_files",)


@dataclass(frozen=True)
class ExpectedWarning:
    """The parts of a warning that the spec pins down (the message text is free)."""

    rule: str
    tool_names: tuple[str, ...]
    count: int
    threshold: int


# --- vocabulary (docs/contract.md §4) ------------------------------------------------------------


def is_boundary(event: AgentEvent) -> bool:
    return isinstance(event, UserMessage | SystemMessage)


def is_tool_step(event: AgentEvent) -> bool:
    return isinstance(event, AssistantMessage) and len(event.tool_calls) > 0


def is_text_step(event: AgentEvent) -> bool:
    return isinstance(event, AssistantMessage) and len(event.tool_calls) == 0


def _is_named(name: str, bases: Sequence[str]) -> bool:
    # "any name ending in `__` plus one of those" (MCP namespacing).
    return any(name == base or name.endswith("__" + base) for base in bases)


def is_mutating_tool(name: str) -> bool:
    return _is_named(name, MUTATING_TOOLS)


def is_read_file_tool(name: str) -> bool:
    return _is_named(name, READ_FILE_TOOLS)


def is_read_many_tool(name: str) -> bool:
    return _is_named(name, READ_MANY_TOOLS)


def compact_json(value: Any) -> str:
    """Compact JSON as in docs/contract.md §3 step 2 (no spaces, sorted keys, non-ASCII kept)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


# --- fingerprints and signatures (docs/contract.md §3) -------------------------------------------


def fingerprint_of_call(call: ToolCall) -> str:
    """A carried fingerprint is used as it is; otherwise it is computed from the call."""
    if call.fingerprint is not None:
        return call.fingerprint
    return call_fingerprint(call.name, call.arguments)


def fingerprint_of_result(result: ToolResult) -> str:
    if result.result_fingerprint is not None:
        return result.result_fingerprint
    return result_fingerprint(result.tool_name, result.result, result.error)


def signatures(history: Sequence[AgentEvent]) -> list[str | None]:
    """The signature of every event in `history` (None for non-results and for results
    whose call cannot be resolved), by one plain forward pass.

    READING: a result's call is "the call with the same id in the session's recent
    assistant messages" *before* the result; when an id was used more than once, the most
    recent use wins (within one message, the later call in the list).
    """
    calls_seen: dict[str, str] = {}
    out: list[str | None] = []
    for event in history:
        if isinstance(event, AssistantMessage):
            for call in event.tool_calls:
                calls_seen[call.id] = fingerprint_of_call(call)
            out.append(None)
        elif isinstance(event, ToolResult):
            call_fp = event.call_fingerprint
            if call_fp is None:
                call_fp = calls_seen.get(event.call_id)
            out.append(None if call_fp is None else call_fp + ":" + fingerprint_of_result(event))
        else:
            out.append(None)
    return out


# --- rules 1 and 2: the run of identical results since the latest boundary -----------


def _latest_boundary_index(history: Sequence[AgentEvent]) -> int:
    for index in range(len(history) - 1, -1, -1):
        if is_boundary(history[index]):
            return index
    return -1


def result_run(history: Sequence[AgentEvent]) -> tuple[ToolResult, int] | None:
    """The newest tool result since the latest boundary and the length of the run of
    newest results that share its signature; None when there is no such result or it
    has no signature (an unresolvable result matches nothing)."""
    sigs = signatures(history)
    start = _latest_boundary_index(history) + 1
    results = [
        (event, sigs[index])
        for index, event in enumerate(history)
        if index >= start and isinstance(event, ToolResult)
    ]
    if not results:
        return None
    newest, newest_sig = results[-1]
    if newest_sig is None:
        return None
    count = 0
    for _, sig in reversed(results):
        if sig != newest_sig:  # a different (or missing) signature ends the run
            break
        count += 1
    return newest, count


def rule_repeated_failed_mutation(
    history: Sequence[AgentEvent], config: DetectionConfig
) -> ExpectedWarning | None:
    run = result_run(history)
    if run is None:
        return None
    newest, count = run
    # READING: "from a mutating tool" is judged by the result's own `tool_name`.
    if newest.error is None or not is_mutating_tool(newest.tool_name):
        return None
    threshold = config.mutating_failure_threshold
    if count < threshold:
        return None
    return ExpectedWarning("repeated_failed_mutation", (newest.tool_name,), count, threshold)


def rule_repeated_result(
    history: Sequence[AgentEvent], config: DetectionConfig
) -> ExpectedWarning | None:
    run = result_run(history)
    if run is None:
        return None
    newest, count = run
    if count < config.threshold:
        return None
    return ExpectedWarning("repeated_result", (newest.tool_name,), count, config.threshold)


# --- rule 3: reads of one resource at several ranges ---------------------------------


def read_resource(call: ToolCall) -> tuple[str, str] | None:
    """The resource a call reads, or None when the call is not a read.

    READING: `path` and `paths` are taken as sent (not normalised like fingerprints), and
    arguments that are not a JSON object make the call "not a read".
    """
    args = call.arguments
    if not isinstance(args, dict):
        return None
    if is_read_file_tool(call.name):
        path = args.get("path")
        return (call.name, path) if isinstance(path, str) else None
    if is_read_many_tool(call.name):
        paths = args.get("paths")
        return (call.name, compact_json(paths)) if isinstance(paths, list) else None
    return None


def read_range(call: ToolCall) -> str:
    """`offset`: missing → "0"; a number → its JSON text; a string → itself; else its
    compact JSON. `limit` is ignored.

    READING: "its JSON text" is the number re-serialised as JSON by Python (`0` → "0",
    `0.0` → "0.0"); a boolean is not a number, and its compact JSON is "true"/"false".
    """
    args = call.arguments
    assert isinstance(args, dict)
    if "offset" not in args:
        return "0"
    offset = args["offset"]
    if isinstance(offset, str):
        return offset
    return compact_json(offset)


def tool_chain(history: Sequence[AgentEvent]) -> list[AssistantMessage]:
    """The newest tool steps, newest first, going back until a boundary or a text step.
    Empty when a boundary or a text step came after the newest tool step."""
    chain: list[AssistantMessage] = []
    for event in reversed(history):
        if is_boundary(event) or is_text_step(event):
            break
        if is_tool_step(event):
            assert isinstance(event, AssistantMessage)
            chain.append(event)
    return chain


def rule_repeated_read_range(
    history: Sequence[AgentEvent], config: DetectionConfig
) -> ExpectedWarning | None:
    chain = tool_chain(history)
    if not chain:
        return None
    target = read_resource(chain[0].tool_calls[0])
    if target is None:
        return None
    ranges: Counter[str] = Counter()
    for step in chain:
        all_reads_of_target = True
        for call in step.tool_calls:
            if read_resource(call) != target:
                all_reads_of_target = False
                break
            ranges[read_range(call)] += 1
        if not all_reads_of_target:
            break
    highest = max(ranges.values())
    if highest >= config.threshold and len(ranges) >= 2:
        return ExpectedWarning("repeated_read_range", (target[0],), highest, config.threshold)
    return None


# --- rule 4: the same batch of calls, step after step --------------------------------


def batch_of(step: AssistantMessage) -> list[str]:
    return sorted(fingerprint_of_call(call) for call in step.tool_calls)


def rule_repeated_batch(
    history: Sequence[AgentEvent], config: DetectionConfig
) -> ExpectedWarning | None:
    steps = [event for event in history if isinstance(event, AssistantMessage)]
    if not steps or is_text_step(steps[-1]):
        return None
    newest = steps[-1]
    batch = batch_of(newest)
    count = 0
    for step in reversed(steps):
        if is_text_step(step) or batch_of(step) != batch:
            break
        count += 1
    if count < config.threshold:
        return None
    # READING: the names are those of the newest step's calls (with carried
    # fingerprints, equal batches could in principle come from differently named calls).
    names = tuple(sorted({call.name for call in newest.tool_calls}))
    return ExpectedWarning("repeated_batch", names, count, config.threshold)


RULE_ORDER = (
    rule_repeated_failed_mutation,
    rule_repeated_result,
    rule_repeated_read_range,
    rule_repeated_batch,
)


def expected_warning(
    history: Sequence[AgentEvent], config: DetectionConfig
) -> ExpectedWarning | None:
    """The warning docs/contract.md §4 gives to the last event of `history` (the first rule that
    matches, in order), or None."""
    for rule in RULE_ORDER:
        warning = rule(history, config)
        if warning is not None:
            return warning
    return None


class ReplaySession:
    """Feeds events of one session as a runtime would and replays the history each time:
    drops duplicate / out-of-order `seq`, starts afresh after `session_end`."""

    def __init__(self, config: DetectionConfig) -> None:
        self.config = config
        self.history: list[AgentEvent] = []
        self.last_seq: int | None = None

    def feed(self, event: AgentEvent) -> tuple[bool, ExpectedWarning | None]:
        """(processed?, expected warning). A skipped event gives (False, None)."""
        if self.last_seq is not None and event.seq <= self.last_seq:
            return False, None
        self.history.append(event)
        self.last_seq = event.seq
        warning = self.judge()
        if event.type == "session_end":
            self.history = []
            self.last_seq = None
        return True, warning

    def judge(self) -> ExpectedWarning | None:
        """The warning the history so far expects (the re-scan of every event)."""
        return expected_warning(self.history, self.config)
