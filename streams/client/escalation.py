"""What a runtime may do at a warning's escalation level (docs/contract.md §9.13): pure,
no I/O, no framework. loopwatch itself never blocks a call; a runtime that wants to stop
a run at level 3 opts in here (an adapter's option, wired by the adapter).

    action = escalation_action(warning)        # "warn" | "insist" | "stop"
    stop_if_advised(warnings)                   # raises LoopStopAdvised at level 3
    stop_if_advised(warnings, on_stop=callback) # or calls back instead

Adapter wiring (a `stop_on_loop=` option per framework adapter) is left to the client's
rewrite (issue 31's note); this module is what each will call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from loopwatch.models import LoopWarning

Action = Literal["warn", "insist", "stop"]

STOP_LEVEL = 3


class LoopStopAdvised(RuntimeError):
    """A loop went on through repeated warnings: loopwatch advises stopping the run.
    The message names the rule, the tools and the count, never arguments or results."""

    def __init__(self, warning: LoopWarning) -> None:
        self.warning = warning
        tools = ", ".join(warning.tool_names) or "-"
        super().__init__(
            f"loopwatch: stop advised: {warning.rule} on {tools} repeated {warning.count} "
            f"times through {warning.level} warning levels"
        )


def escalation_action(warning: LoopWarning) -> Action:
    """`warn` (level 1, or a warning without a level: no escalation), `insist` (2),
    `stop` (3: stop advised)."""
    level = warning.level or 1
    return "stop" if level >= STOP_LEVEL else "insist" if level == 2 else "warn"


def stop_if_advised(
    warnings: Iterable[LoopWarning],
    *,
    on_stop: Callable[[LoopWarning], None] | None = None,
) -> LoopWarning | None:
    """The first warning that advises stopping, if any: `on_stop(warning)` is called with
    it, or, without `on_stop`, `LoopStopAdvised` is raised. None when no warning does."""
    for warning in warnings:
        if escalation_action(warning) == "stop":
            if on_stop is None:
                raise LoopStopAdvised(warning)
            on_stop(warning)
            return warning
    return None
