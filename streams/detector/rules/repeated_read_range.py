"""Rule 3, repeated_read_range (docs/contract.md §4): the same range of one resource, read again.

The tracker keeps the chain of reads ending at the newest tool step: the target, and a
count per range. A step whose calls all read the target extends the chain into the step
before it; a boundary or a text step ends it. Matches when some range was read
`threshold` times and at least one read of the chain has another range.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from loopwatch.models import AssistantMessage, DetectionConfig
from loopwatch.models.fingerprints import canonical_json
from loopwatch.streams.detector.rules.base import Hit, Rule, Tracker
from loopwatch.streams.detector.tools import is_named, short_digest

READ_FILE_TOOL = "read_file"
READ_MANY_TOOL = "read_many_files"
"""Also any `<server>__<name>` of these (MCP namespacing)."""

MAX_CHAIN_RANGES = 256
"""Distinct read ranges counted in one chain. At the cap, reads of further new ranges
are not counted individually (the chain already has other ranges, so the "another
range" condition stays true); ranges already tracked keep counting."""

_MAX_RANGE_KEY_CHARS = 40


def read_resource(tool_name: str, arguments: Any) -> str | None:
    """The resource a read call targets, or None when the call is not a read.

    (tool name, `path`) for read_file tools, (tool name, compact JSON of `paths`) for
    read_many_files tools; a call without a string `path` / list `paths` is not a read.
    Raw (it holds a path): compare it, and keep only `short_digest` of it in state.
    """
    if not isinstance(arguments, dict):
        return None
    if is_named(tool_name, READ_FILE_TOOL):
        path = arguments.get("path")
        return f"{tool_name}\x00{path}" if isinstance(path, str) else None
    if is_named(tool_name, READ_MANY_TOOL):
        paths = arguments.get("paths")
        if isinstance(paths, list):
            return f"{tool_name}\x00{canonical_json(paths).decode('utf-8')}"
    return None


def read_range(arguments: dict[str, Any]) -> str:
    """The range of a read: its `offset` (missing → "0"; a number → its JSON text; a
    string → itself, so "0" equals 0; anything else → compact JSON). `limit` is ignored."""
    offset = arguments.get("offset", "0")
    if isinstance(offset, str):
        key = offset
    elif type(offset) is int:  # json.dumps writes an int as int.__repr__ does, and faster
        key = int.__repr__(offset)
    elif isinstance(offset, int | float) and not isinstance(offset, bool):
        key = json.dumps(offset)
    else:
        key = canonical_json(offset).decode("utf-8")
    # Offsets are short; anything long is digested so state stays small and raw-free.
    return key if len(key) <= _MAX_RANGE_KEY_CHARS else "#" + short_digest(key)


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class ReadChain:
    tool: str | None = None
    """Tool name of the chain's target; None when there is no live chain."""
    target: str = ""
    """Digest of the target resource."""
    full: bool = False
    """Whether every call of the newest tool step read the target (the chain may extend)."""
    ranges: dict[str, int] = field(default_factory=dict)
    """Range → count of reads of the target in the chain (replaced, never mutated)."""
    top: int = 0
    """The highest count in `ranges`."""


_EMPTY = ReadChain()


class ReadChainTracker(Tracker[ReadChain]):
    key = "chain"

    def empty(self) -> ReadChain:
        return _EMPTY

    def on_boundary(self, part: ReadChain) -> ReadChain:
        return _EMPTY

    def on_text_step(self, part: ReadChain) -> ReadChain:
        return _EMPTY

    def on_tool_step(
        self, part: ReadChain, event: AssistantMessage, call_digests: list[str]
    ) -> ReadChain:
        calls = event.tool_calls
        first = calls[0]
        resource = read_resource(first.name, first.arguments)
        if resource is None:
            return _EMPTY
        ranges: list[str] = []
        for call in calls:
            if call is not first and read_resource(call.name, call.arguments) != resource:
                break
            ranges.append(read_range(call.arguments))
        target = short_digest(resource)
        full = len(ranges) == len(calls)
        # The chain reaches back into the previous tool step only when this step read the
        # target and nothing else; that step's own chain already says how far it reaches.
        continues = full and part.tool is not None and part.target == target
        counts = dict(part.ranges) if continues else {}
        top = part.top if continues else 0
        for key in ranges:
            if key in counts:
                counts[key] += 1
            elif len(counts) < MAX_CHAIN_RANGES:
                counts[key] = 1
            else:
                continue
            top = max(top, counts[key])
        return ReadChain(first.name, target, full, counts, top)

    def to_snapshot(self, part: ReadChain, *, copy: bool) -> Any:
        ranges = dict(part.ranges) if copy else part.ranges
        return [part.tool, part.target, part.full, ranges, part.top]

    def from_snapshot(self, data: Any) -> ReadChain:
        tool, target, full, ranges, top = data
        counts = {str(key): int(count) for key, count in ranges.items()}
        return ReadChain(tool, str(target), bool(full), counts, int(top))


READ_CHAIN = ReadChainTracker()


class RepeatedReadRange(Rule[ReadChain]):
    name = "repeated_read_range"
    tracker = READ_CHAIN
    template = (
        "Loop warning (repeated_read_range): you have read the same range of one "
        "resource with {tools} {count} times in this run of reads. Use the content you "
        "already have, read a different part or source, or report the blocker."
    )

    def check(self, part: ReadChain, config: DetectionConfig) -> Hit | None:
        if part.tool is None or part.top < config.threshold or len(part.ranges) < 2:
            return None
        return Hit((part.tool,), part.top, config.threshold, part.target)


RULE = RepeatedReadRange()
