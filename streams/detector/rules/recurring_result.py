"""Rule 8, recurring_result (docs/contract.md §9.11; `extended`): the same call with the
same result, again and again, but not in a row — other calls in between (`ls`, `read a`,
`ls`, `grep`, `ls` …), which rule 2 (consecutive) and rule 6 (strictly periodic) miss.

The window is the last `WINDOW` signed results since the latest boundary; the count is
how many of them have the newest result's signature (loose when the profile compares
results so, §9.9). Kept as 24-hex-digit keys (12 of the call digest, 12 of the result's),
at most `WINDOW` of them.
"""

from __future__ import annotations

from typing import Any

from loopwatch.models import DetectionConfig, ToolResult
from loopwatch.streams.detector.rules.base import Hit, Rule, Tracker

WINDOW = 10
_KEY = 12

Window = tuple[tuple[str, ...], str, bool]
"""(keys of the last signed results since the boundary, oldest first; the newest
result's tool name; whether the newest result was signed)."""
_EMPTY: Window = ((), "", False)


class ResultWindowTracker(Tracker[Window]):
    key = "window"
    reads_signatures = True

    def empty(self) -> Window:
        return _EMPTY

    def on_boundary(self, part: Window) -> Window:
        return _EMPTY

    def on_result(self, part: Window, event: ToolResult, signature: str | None) -> Window:
        if signature is None:
            return (part[0], event.tool_name, False)
        key = signature[:_KEY] + signature[33 : 33 + _KEY]
        return ((*part[0], key)[-WINDOW:], event.tool_name, True)

    def to_snapshot(self, part: Window, *, copy: bool) -> Any:
        return [list(part[0]), part[1], part[2]]

    def from_snapshot(self, data: Any) -> Window:
        keys, tool, signed = data
        return (tuple(str(k) for k in keys), str(tool), bool(signed))


RESULT_WINDOW = ResultWindowTracker()


class RecurringResult(Rule[Window]):
    name = "recurring_result"
    tracker = RESULT_WINDOW
    template = (
        "Loop warning (recurring_result): {tools} has returned the same result for the same "
        "call {count} times in its last few calls, with other calls in between. Going round "
        "again will not change it: use what it returned, change the approach, or report "
        "the blocker."
    )

    def check(self, part: Window, config: DetectionConfig) -> Hit | None:
        keys, tool, signed = part
        if not signed:
            return None
        count = keys.count(keys[-1])
        if count < config.threshold:
            return None
        return Hit((tool,), count, config.threshold, keys[-1])


RULE = RecurringResult()
