"""What a runtime may do at a warning's escalation level (docs/contract.md §9.13): pure,
no I/O, no framework. loopwatch itself never blocks a call; a runtime that wants to stop
a run at level 3 opts in here.

    action = escalation_action(warning)        # "warn" | "insist" | "stop"
    stop_if_advised(warnings)                   # raises LoopStopAdvised at level 3
    stop_if_advised(warnings, on_stop=callback) # or calls back instead

Each framework adapter (`langchain`, `openai_agents`, `pydantic_ai`, `claude_agent`)
takes the option `stop_on_loop=`: False (the default: warnings only), True (stop the run
at a level-3 warning: `LoopStopAdvised` is raised out of the run, or, in Claude Code's
hooks, the hook answers `continue: false` with the reason) or a callback, called once
with the warning instead. `LoopStopper` is that option: it acts once per warning, on
warnings it has not seen before, so a run that goes on (a callback that only records)
is not stopped again by the same warning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from loopwatch.models import LoopWarning
from loopwatch.streams.client.ledger import PlacedWarning
from loopwatch.streams.client.session import VerdictWait

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


StopOnLoop = bool | Callable[[LoopWarning], None]
"""An adapter's `stop_on_loop` option: False, True (raise `LoopStopAdvised`) or a callback."""


class LoopStopper:
    """An adapter's `stop_on_loop` option, per session: looks at the warnings of the
    latest verdict wait that it has not looked at before (by seq)."""

    def __init__(self, option: StopOnLoop = False) -> None:
        if not (isinstance(option, bool) or callable(option)):
            raise TypeError(f"stop_on_loop must be True, False or a callable, got {option!r}")
        self.option = option
        self._seen_through: dict[str, int] = {}  # session -> highest seq looked at

    @property
    def enabled(self) -> bool:
        return self.option is not False

    def advised(self, session_id: str, placed: Iterable[PlacedWarning]) -> LoopWarning | None:
        """The first new warning that advises stopping (None: none, or the option is
        off); every given warning counts as seen."""
        if not self.enabled:
            return None
        through = self._seen_through.get(session_id, -1)
        fresh = [p for p in placed if p.seq > through]
        if not fresh:
            return None
        self._seen_through[session_id] = max(p.seq for p in fresh)
        return next((p.warning for p in fresh if escalation_action(p.warning) == "stop"), None)

    def check(self, session_id: str, placed: Iterable[PlacedWarning]) -> None:
        """Act on a new stop-advised warning: raise `LoopStopAdvised` (option True) or
        call the callback with it."""
        warning = self.advised(session_id, placed)
        if warning is not None:
            on_stop = self.option if callable(self.option) else None
            stop_if_advised((warning,), on_stop=on_stop)

    def after_wait(self, session_id: str, wait: VerdictWait | None) -> None:
        """`check` on the warnings of a session's latest verdict wait (None: no wait)."""
        if wait is not None and self.enabled:
            self.check(session_id, wait.warnings)

    def forget(self, session_id: str) -> None:
        """The session ended: drop what was seen of it."""
        self._seen_through.pop(session_id, None)
