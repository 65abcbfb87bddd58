"""Rule 9, repeated_call (docs/contract.md §9.12; `extended`): a calls-only floor. The same
batch of calls issued `call_floor_threshold` times in a row (default 5, above the other
rules' thresholds), whatever the results: polling a clock, a command whose output differs
only in a counter, a framework answering each repeat with its own changing refusal text —
every result-aware rule sees "progress" there.

Reads the tool-step tracker's calls-only run: a text step or a user message ends it, a
system message does not.
"""

from __future__ import annotations

from loopwatch.models import DetectionConfig
from loopwatch.streams.detector.rules.base import Hit, Rule
from loopwatch.streams.detector.rules.steps import Steps
from loopwatch.streams.detector.rules.steps_tracker import STEPS
from loopwatch.streams.detector.tools import short_digest


class RepeatedCall(Rule[Steps]):
    name = "repeated_call"
    tracker = STEPS
    template = (
        "Loop warning (repeated_call): the same {tools} call has been made {count} times in "
        "a row. Its results are changing, but the calls are not getting anywhere: stop "
        "repeating it, change the approach, or report the blocker."
    )

    def check(self, part: Steps, config: DetectionConfig) -> Hit | None:
        if not part.batch or part.calls_run < config.call_floor_threshold:
            return None
        return Hit(
            part.tools, part.calls_run, config.call_floor_threshold, short_digest(part.batch)
        )


RULE = RepeatedCall()
