"""Rule 2, repeated_result (docs/contract.md §4): the same call gave the same result, again.

Matches when the run of identical results since the boundary (any tool, failed or not)
reaches `threshold`.
"""

from __future__ import annotations

from loopwatch.models import DetectionConfig
from loopwatch.streams.detector.rules.base import Hit, Rule
from loopwatch.streams.detector.rules.result_run import RESULT_RUN, ResultRun


class RepeatedResult(Rule[ResultRun]):
    name = "repeated_result"
    tracker = RESULT_RUN
    template = (
        "Loop warning (repeated_result): {tools} has returned the same result for the "
        "same call {count} times in a row. Use what it already returned, try different "
        "arguments or another source, or report the blocker."
    )

    def check(self, part: ResultRun, config: DetectionConfig) -> Hit | None:
        if part.signature is None or part.run < config.threshold:
            return None
        return Hit((part.tool,), part.run, config.threshold, part.signature)


RULE = RepeatedResult()
