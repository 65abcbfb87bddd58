"""Rule 4, repeated_batch (docs/contract.md §4): the same batch of tool calls, issued again.

A batch is the sorted list of a tool step's call fingerprints. The tracker counts the
newest consecutive tool steps with the same batch; boundaries and results in between
don't break the run, a text step does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopwatch.models import AssistantMessage, DetectionConfig
from loopwatch.streams.detector.rules.base import Hit, Rule, Tracker
from loopwatch.streams.detector.tools import short_digest


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class BatchRun:
    digest: str | None = None
    """Digest of the newest tool step's batch; None after a text step."""
    run: int = 0
    """How many of the newest tool steps had that batch, consecutively."""
    tools: tuple[str, ...] = ()
    """The batch's tool names, sorted, distinct."""


_EMPTY = BatchRun()


class BatchRunTracker(Tracker[BatchRun]):
    key = "batch"

    def empty(self) -> BatchRun:
        return _EMPTY

    def on_text_step(self, part: BatchRun) -> BatchRun:
        return _EMPTY

    def on_tool_step(
        self, part: BatchRun, event: AssistantMessage, call_digests: list[str]
    ) -> BatchRun:
        batch = short_digest(",".join(sorted(call_digests)))
        run = part.run + 1 if batch == part.digest else 1
        tools = tuple(sorted({call.name for call in event.tool_calls}))
        return BatchRun(batch, run, tools)

    def to_snapshot(self, part: BatchRun, *, copy: bool) -> Any:
        return [part.digest, part.run, list(part.tools)]

    def from_snapshot(self, data: Any) -> BatchRun:
        digest, run, tools = data
        return BatchRun(digest, int(run), tuple(tools))


BATCH_RUN = BatchRunTracker()


class RepeatedBatch(Rule[BatchRun]):
    name = "repeated_batch"
    tracker = BATCH_RUN
    template = (
        "Loop warning (repeated_batch): you have issued the same batch of tool calls "
        "({tools}) {count} times in a row. Change the calls or their arguments, use the "
        "results you already have, or report the blocker."
    )

    def check(self, part: BatchRun, config: DetectionConfig) -> Hit | None:
        if part.digest is None or part.run < config.threshold:
            return None
        return Hit(part.tools, part.run, config.threshold, part.digest)


RULE = RepeatedBatch()
