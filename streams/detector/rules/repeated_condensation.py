"""Rule 11, repeated_condensation (docs/contract.md §9.15; `extended`): the platform
condensing the conversation history again and again with no model turn between, so the
agent never gets to act (a context-window error loop: each attempt overflows, is
condensed, and overflows again).

Its own tracker (`"condensations"`): how many `context_condensed` events came in a row.
An assistant message (a model turn: text or tool step) or a user message ends the run;
a system message and tool results do not.
"""

from __future__ import annotations

from typing import Any

from loopwatch.models import AssistantMessage, DetectionConfig
from loopwatch.streams.detector.rules.base import Hit, Rule, Tracker

_SUBJECT = "context_condensed"
"""One subject: a session has one history to condense."""


class CondensationRunTracker(Tracker[int]):
    key = "condensations"

    def empty(self) -> int:
        return 0

    def on_user_message(self, part: int) -> int:
        return 0

    def on_text_step(self, part: int) -> int:
        return 0

    def on_tool_step(self, part: int, event: AssistantMessage, call_digests: list[str]) -> int:
        return 0

    def on_condensed(self, part: int) -> int:
        return part + 1

    def to_snapshot(self, part: int, *, copy: bool) -> Any:
        return part

    def from_snapshot(self, data: Any) -> int:
        return int(data)


CONDENSATION_RUN = CondensationRunTracker()


class RepeatedCondensation(Rule[int]):
    name = "repeated_condensation"
    tracker = CONDENSATION_RUN
    template = (
        "Loop warning (repeated_condensation): the conversation has been condensed {count} "
        "times in a row without a step in between, and it still does not fit. Work with "
        "less context: narrow the task, avoid large outputs, or report the blocker."
    )

    def check(self, part: int, config: DetectionConfig) -> Hit | None:
        limit = config.condensation_threshold
        if part < limit:
            return None
        return Hit((), part, limit, _SUBJECT)


RULE = RepeatedCondensation()
