"""`STEPS`, the tool-step tracker of the extended rules: the hooks that feed `steps.Steps`
from events, and its part of the session snapshot (a JSON list)."""

from __future__ import annotations

from typing import Any

from loopwatch.models import AssistantMessage, ToolResult
from loopwatch.streams.detector.rules.base import Tracker
from loopwatch.streams.detector.rules.steps import (
    EMPTY,
    Steps,
    Unit,
    on_boundary,
    on_result,
    on_text_step,
    on_tool_step,
    on_user_message,
)
from loopwatch.streams.detector.tools import id_digest


class StepsTracker(Tracker[Steps]):
    key = "steps"
    reads_signatures = True

    def empty(self) -> Steps:
        return EMPTY

    def on_boundary(self, part: Steps) -> Steps:
        return on_boundary(part)

    def on_user_message(self, part: Steps) -> Steps:
        return on_user_message(part)

    def on_text_step(self, part: Steps) -> Steps:
        return on_text_step(part)

    def on_tool_step(self, part: Steps, event: AssistantMessage, call_digests: list[str]) -> Steps:
        names = tuple(call.name for call in event.tool_calls)
        # The sorted call digests themselves (no second hash of rule 4's batch): digests
        # only, at most 64 calls' worth while a step is pending.
        batch = ",".join(sorted(call_digests))
        return on_tool_step(
            part,
            batch=batch,
            id_digests=[id_digest(call.id) for call in event.tool_calls],
            fingerprints=call_digests,
            names=names,
            tools=tuple(sorted(set(names))),
            continues=batch == part.batch,
        )

    def on_result(self, part: Steps, event: ToolResult, signature: str | None) -> Steps:
        if part.ids is None:
            return part
        return on_result(part, id_digest(event.call_id), signature)

    def to_snapshot(self, part: Steps, *, copy: bool) -> Any:
        return to_snapshot(part)

    def from_snapshot(self, data: Any) -> Steps:
        return from_snapshot(data)


STEPS = StepsTracker()


def to_snapshot(steps: Steps) -> list[Any]:
    return [
        None if steps.ids is None else sorted(steps.ids),
        sorted(steps.open_ids),
        steps.batch,
        list(steps.tools),
        steps.results,
        f"{steps.total:x}",
        steps.joinable,
        steps.continues,
        steps.last_outcome,
        steps.same_outcomes,
        steps.aware_run,
        steps.turn_count,
        list(steps.turn_tools),
        [[unit.digest, list(unit.tools)] for unit in steps.units],
        list(steps.tails),
    ]


def from_snapshot(data: list[Any] | None) -> Steps:
    """`to_snapshot`'s list; None (a snapshot from before these rules) gives no state."""
    if data is None:
        return EMPTY
    (ids, open_ids, batch, tools, results, total, joinable, continues, last, same, aware,
     turn_count, turn_tools, units, tails) = data  # fmt: skip
    return Steps(
        ids=None if ids is None else frozenset(ids),
        open_ids=frozenset(open_ids),
        batch=str(batch),
        tools=tuple(tools),
        results=int(results),
        total=int(total, 16),
        joinable=bool(joinable),
        continues=bool(continues),
        last_outcome=last,
        same_outcomes=int(same),
        aware_run=int(aware),
        turn_count=int(turn_count),
        turn_tools=tuple(turn_tools),
        units=tuple(Unit(str(d), tuple(t)) for d, t in units),
        tails=(int(tails[0]), int(tails[1]), int(tails[2]), int(tails[3])),
    )
