"""Rule 7, repeated_error (docs/contract.md §9.10; `extended`): the same tool failing with
the same *class* of error, whatever its arguments — a tool that does not exist called
again with new arguments, "permission denied" on one path after another.

The seed counts failures only for a fixed list of mutating tools and only for identical
calls (rule 1). Here the run is of the newest failed results in a row since the latest
boundary that come from the same tool with the same error class (the error text with
its volatile parts, quoted text, paths and numbers masked: `models.volatile.error_class`).
A successful result, or a failure of another tool or class, ends the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopwatch.models import DetectionConfig, ToolResult
from loopwatch.models.volatile import error_class
from loopwatch.streams.detector.rules.base import Hit, Rule, Tracker
from loopwatch.streams.detector.tools import short_digest


@dataclass(frozen=True, slots=True)
class ErrorRun:
    key: str = ""
    """Digest of (tool name, error class) of the newest result when it failed; "" else."""
    tool: str = ""
    run: int = 0


_EMPTY = ErrorRun()


class ErrorRunTracker(Tracker[ErrorRun]):
    key = "errors"

    def empty(self) -> ErrorRun:
        return _EMPTY

    def on_boundary(self, part: ErrorRun) -> ErrorRun:
        return _EMPTY

    def on_result(self, part: ErrorRun, event: ToolResult, signature: str | None) -> ErrorRun:
        error = event.error
        if error is None:
            return _EMPTY
        key = short_digest(f"{event.tool_name}\0{error_class(error)}")
        return ErrorRun(key, event.tool_name, part.run + 1 if key == part.key else 1)

    def to_snapshot(self, part: ErrorRun, *, copy: bool) -> Any:
        return [part.key, part.tool, part.run]

    def from_snapshot(self, data: Any) -> ErrorRun:
        key, tool, run = data
        return ErrorRun(str(key), str(tool), int(run))


ERROR_RUN = ErrorRunTracker()


class RepeatedError(Rule[ErrorRun]):
    name = "repeated_error"
    tracker = ERROR_RUN
    template = (
        "Loop warning (repeated_error): {tools} has failed {count} times in a row with the "
        "same kind of error, even with different arguments. Changing the arguments is not "
        "working: read the error, use another tool or approach, or report the blocker."
    )

    def check(self, part: ErrorRun, config: DetectionConfig) -> Hit | None:
        if part.run < config.error_threshold:
            return None
        return Hit((part.tool,), part.run, config.error_threshold, part.key)


RULE = RepeatedError()
