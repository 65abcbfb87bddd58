"""Rule 4, repeated_batch, result-aware (docs/contract.md §9.3; `result_aware_batches`, on
in the `extended` profile): the same batch of calls issued again *after the same
outcome*. A re-run whose output changes (the error moves, a count changes) is progress
and never reaches the threshold; the seed's rule 4 counts the calls only.

Same name on the wire as the seed's rule; it reads the tool-step tracker instead.
"""

from __future__ import annotations

from loopwatch.models import DetectionConfig
from loopwatch.streams.detector.rules.base import Hit, Rule
from loopwatch.streams.detector.rules.repeated_batch import RULE as CALLS_ONLY
from loopwatch.streams.detector.rules.steps import Steps
from loopwatch.streams.detector.rules.steps_tracker import STEPS
from loopwatch.streams.detector.tools import short_digest


class RepeatedBatchOutcomes(Rule[Steps]):
    name = "repeated_batch"
    tracker = STEPS
    applies_policy = True
    template = CALLS_ONLY.template

    def check(self, part: Steps, config: DetectionConfig) -> Hit | None:
        if not part.batch:  # no tool step, or a text step came after it
            return None
        limit = (
            config.threshold_for(self.name, part.tools)
            if config.has_tool_policy
            else config.threshold
        )
        if limit is None or part.aware_run < limit:
            return None
        return Hit(part.tools, part.aware_run, limit, short_digest(part.batch))


RULE = RepeatedBatchOutcomes()
