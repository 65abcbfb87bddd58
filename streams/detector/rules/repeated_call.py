"""Rule 9, repeated_call (docs/contract.md §9.12; `extended`): a calls-only floor. The same
batch of calls issued `call_floor_threshold` times in a row (default 5, above the other
rules' thresholds), whatever the results: polling a clock, a command whose output differs
only in a counter, a framework answering each repeat with its own changing refusal text —
every result-aware rule sees "progress" there.

Its own tracker (`"call_run"`): the newest tool step's batch (its sorted call digests)
and how many tool steps in a row had it; a text step or a user message ends the run, a
system message and tool results do not.
"""

from __future__ import annotations

from typing import Any

from loopwatch.models import AssistantMessage, DetectionConfig
from loopwatch.streams.detector.rules.base import Hit, Rule, Tracker
from loopwatch.streams.detector.tools import short_digest

CallRun = tuple[str, tuple[str, ...], int]
"""(batch: the sorted call digests joined by `,`, "" when none; the step's sorted
distinct tool names; the run's length)."""
_EMPTY: CallRun = ("", (), 0)


class CallRunTracker(Tracker[CallRun]):
    key = "call_run"

    def empty(self) -> CallRun:
        return _EMPTY

    def on_user_message(self, part: CallRun) -> CallRun:
        return _EMPTY

    def on_text_step(self, part: CallRun) -> CallRun:
        return _EMPTY

    def on_tool_step(
        self, part: CallRun, event: AssistantMessage, call_digests: list[str]
    ) -> CallRun:
        batch = ",".join(sorted(call_digests))
        if batch == part[0]:
            return (batch, part[1], part[2] + 1)
        return (batch, tuple(sorted({call.name for call in event.tool_calls})), 1)

    def to_snapshot(self, part: CallRun, *, copy: bool) -> Any:
        return [part[0], list(part[1]), part[2]]

    def from_snapshot(self, data: Any) -> CallRun:
        batch, tools, run = data
        return (str(batch), tuple(str(t) for t in tools), int(run))


CALL_RUN = CallRunTracker()


class RepeatedCall(Rule[CallRun]):
    name = "repeated_call"
    tracker = CALL_RUN
    template = (
        "Loop warning (repeated_call): the same {tools} call has been made {count} times in "
        "a row. Its results are changing, but the calls are not getting anywhere: stop "
        "repeating it, change the approach, or report the blocker."
    )

    def check(self, part: CallRun, config: DetectionConfig) -> Hit | None:
        batch, tools, run = part
        limit = config.call_floor_threshold
        if not batch or run < limit:
            return None
        return Hit(tools, run, limit, short_digest(batch))


RULE = RepeatedCall()
