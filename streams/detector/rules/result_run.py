"""The run of identical tool results since the latest boundary (read by rules 1 and 2).

docs/contract.md §4 rules 1-2: the newest results that share the newest one's signature,
consecutively; a different signature ends the run, assistant messages in between don't,
a boundary starts afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopwatch.models import ToolResult
from loopwatch.streams.detector.rules.base import Tracker


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class ResultRun:
    signature: str | None = None
    """Signature of the newest result since the boundary (None: none, or unsigned)."""
    run: int = 0
    """How many of the newest results share that signature, consecutively."""
    failed: bool = False
    """Whether the newest result failed (its `error` is a string)."""
    tool: str = ""
    """The newest result's tool name."""


_EMPTY = ResultRun()


class ResultRunTracker(Tracker[ResultRun]):
    key = "result"
    reads_signatures = True

    def empty(self) -> ResultRun:
        return _EMPTY

    def on_boundary(self, part: ResultRun) -> ResultRun:
        return _EMPTY

    def on_result(self, part: ResultRun, event: ToolResult, signature: str | None) -> ResultRun:
        if signature is None:
            # An unresolvable call: no signature, matches nothing, ends any run.
            return ResultRun(None, 0, event.error is not None, event.tool_name)
        run = part.run + 1 if signature == part.signature else 1
        return ResultRun(signature, run, event.error is not None, event.tool_name)

    def to_snapshot(self, part: ResultRun, *, copy: bool) -> Any:
        return [part.signature, part.run, part.failed, part.tool]

    def from_snapshot(self, data: Any) -> ResultRun:
        signature, run, failed, tool = data
        return ResultRun(signature, int(run), bool(failed), str(tool))


RESULT_RUN = ResultRunTracker()
