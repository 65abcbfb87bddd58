"""Rule 1, repeated_failed_mutation (docs/contract.md §4): the same failed mutating call, again.

Matches when the newest result since the boundary failed, comes from a mutating tool,
and its run of identical results reaches `mutating_failure_threshold`.
"""

from __future__ import annotations

from loopwatch.models import DetectionConfig
from loopwatch.streams.detector.rules.base import Hit, Rule
from loopwatch.streams.detector.rules.result_run import RESULT_RUN, ResultRun
from loopwatch.streams.detector.tools import is_named

MUTATING_TOOLS = ("edit_file", "write_file", "delete_file", "bash")
"""Also any `<server>__<name>` of these (MCP namespacing)."""


def is_mutating(tool_name: str) -> bool:
    return any(is_named(tool_name, base) for base in MUTATING_TOOLS)


class RepeatedFailedMutation(Rule[ResultRun]):
    name = "repeated_failed_mutation"
    tracker = RESULT_RUN
    template = (
        "Loop warning (repeated_failed_mutation): the same {tools} call has now failed "
        "{count} times in a row with the same error, shown in the preceding tool "
        "result. Do not run it again unchanged: read that error, change the arguments "
        "or the approach, or report the blocker."
    )

    def check(self, part: ResultRun, config: DetectionConfig) -> Hit | None:
        limit = config.mutating_failure_threshold
        if (
            part.signature is None
            or part.run < limit
            or not part.failed
            or not is_mutating(part.tool)
        ):
            return None
        return Hit((part.tool,), part.run, limit, part.signature)


RULE = RepeatedFailedMutation()
