"""Rule 5, repeated_call_in_turn (docs/contract.md §9.2): one assistant message holds the
same call several times (parallel tool calling), which no run across steps counts.

Matches while the newest assistant message (no boundary after it) holds
`call_in_turn_threshold` or more calls with one call fingerprint.
"""

from __future__ import annotations

from loopwatch.models import DetectionConfig
from loopwatch.streams.detector.rules.base import Hit, Rule
from loopwatch.streams.detector.rules.steps import Steps
from loopwatch.streams.detector.rules.steps_tracker import STEPS
from loopwatch.streams.detector.tools import short_digest


class RepeatedCallInTurn(Rule[Steps]):
    name = "repeated_call_in_turn"
    tracker = STEPS
    applies_policy = True
    template = (
        "Loop warning (repeated_call_in_turn): your last message made the same {tools} "
        "call {count} times at once. One call gives the same answer; use its result, "
        "change the arguments, or report the blocker."
    )

    def check(self, part: Steps, config: DetectionConfig) -> Hit | None:
        if not part.turn_count:  # a text step, or a boundary, came last
            return None
        limit = (
            config.threshold_for(self.name, part.turn_tools)
            if config.has_tool_policy
            else config.call_in_turn_threshold
        )
        if limit is None or part.turn_count < limit:
            return None
        return Hit(part.turn_tools, part.turn_count, limit, short_digest(part.batch))


RULE = RepeatedCallInTurn()
