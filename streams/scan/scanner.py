"""Offline detection over a stream of events of many interleaved sessions (no broker).

The same core as the stream app, with sessions held in a dict instead of a faust table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from loopwatch.models import AgentEvent, DetectionConfig, LoopEpisode, LoopVerdict, PolicyRef
from loopwatch.streams.detector import SessionState, WarningTexts, expire_episodes, observe_episodes
from loopwatch.streams.detector.texts import DEFAULT_TEXTS
from loopwatch.streams.kafka.expiry import idle_past

DEFAULT_IDLE_TTL = 86_400.0
"""The worker's default `LOOPWATCH_SESSION_TTL_SECONDS` (a day)."""


@dataclass
class ScanStats:
    """What a scan saw, for its summary line."""

    events: int = 0
    """Events processed (each got a verdict)."""
    duplicates: int = 0
    """Events skipped as duplicate or out of order."""
    invalid: int = 0
    """Input lines skipped as invalid (not an event, or the detector failed on them)."""
    sessions: set[str] = field(default_factory=set)
    warnings: Counter[str] = field(default_factory=Counter)
    """Warnings by rule."""
    episodes: Counter[str] = field(default_factory=Counter)
    """Closed loop episodes by outcome."""
    resets: int = 0
    """Events whose session's state was reset as idle first (`state_reset`)."""

    def summary(self) -> str:
        rules = ", ".join(f"{rule}={n}" for rule, n in sorted(self.warnings.items()))
        outcomes = ", ".join(f"{outcome}={n}" for outcome, n in sorted(self.episodes.items()))
        return (
            f"{counted(self.events, 'event')}, {counted(len(self.sessions), 'session')}, "
            f"{counted(sum(self.warnings.values()), 'warning')} ({rules or 'none'}), "
            f"{self.duplicates} duplicate/out-of-order skipped; "
            f"{counted(self.invalid, 'invalid line')}; "
            f"{counted(sum(self.episodes.values()), 'loop episode')} ({outcomes or 'none'})"
            + (f"; {counted(self.resets, 'idle state reset')}" if self.resets else "")
        )

    def to_json(self) -> dict[str, object]:
        """The summary's numbers (`scan --json`)."""
        return {
            "events": self.events,
            "sessions": len(self.sessions),
            "warnings": sum(self.warnings.values()),
            "warnings_by_rule": dict(sorted(self.warnings.items())),
            "duplicates_skipped": self.duplicates,
            "invalid_lines": self.invalid,
            "episodes": sum(self.episodes.values()),
            "episodes_by_outcome": dict(sorted(self.episodes.items())),
            "state_resets": self.resets,
        }


def counted(n: int, noun: str) -> str:
    """`1 event`, `2 events`, `0 events`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class Scanner:
    """Feeds events to the detector, one state per session, in arrival order."""

    def __init__(
        self,
        config: DetectionConfig,
        texts: WarningTexts = DEFAULT_TEXTS,
        *,
        policy: PolicyRef | None = None,
        idle_ttl: float | None = DEFAULT_IDLE_TTL,
    ) -> None:
        self.config = config
        self.texts = texts
        self.policy = policy
        """The policy record `config` came from, named in every verdict (None: none)."""
        self.idle_ttl = idle_ttl
        """The worker's `LOOPWATCH_SESSION_TTL_SECONDS`: an event stamped more than this
        after its session's previous one finds the state reset, as live (contract §8.5).
        None: never."""
        self._idle_delta = None if idle_ttl is None else timedelta(seconds=idle_ttl)
        self.stats = ScanStats()
        self._states: dict[str, SessionState] = {}
        self.closed_episodes: tuple[LoopEpisode, ...] = ()

    def open_episodes(self) -> list[LoopEpisode]:
        """Episodes still open at the end of the input, closed `expired` (the state of
        a recorded session that never ended would expire in the worker)."""
        closed: list[LoopEpisode] = []
        for sid, state in self._states.items():
            closed.extend(expire_episodes(state, sid))
        self.stats.episodes.update(episode.outcome for episode in closed)
        return closed

    def judge(self, event: AgentEvent) -> LoopVerdict | None:
        """The event's verdict, or None for a duplicate / out-of-order event. Loop
        episodes it closed are in `closed_episodes` until the next call."""
        sid = event.session_id
        states, stats = self._states, self.stats
        state = states.get(sid)
        reset: tuple[LoopEpisode, ...] | None = None
        if (
            state is not None
            and self._idle_delta is not None
            and event.seq > state.last_seq  # a duplicate resets nothing (the worker's order)
            and idle_past(state.last_ts, event.ts, self._idle_delta)
        ):
            reset, state = tuple(expire_episodes(state, sid)), None
        observation = observe_episodes(
            state, event, self.config, texts=self.texts, policy=self.policy
        )
        closed = self.closed_episodes = observation.closed
        if reset is not None:  # its open loops end `expired` first, as live
            closed = self.closed_episodes = (*reset, *closed)
        if closed:  # rare; Counter.update costs even when given nothing
            stats.episodes.update(episode.outcome for episode in closed)
        verdict = observation.verdict
        if verdict is None:
            stats.duplicates += 1
            return None
        if reset is not None:
            verdict = verdict.model_copy(update={"state_reset": True})
            stats.resets += 1
        state = observation.state
        if state is None:  # session_end: observe dropped the state
            states.pop(sid, None)
        else:
            states[sid] = state
        stats.events += 1
        stats.sessions.add(sid)
        warning = verdict.warning
        if warning is not None:
            stats.warnings[warning.rule] += 1
        return verdict

    def run(self, events: Iterable[AgentEvent]) -> Iterator[LoopVerdict]:
        for event in events:
            verdict = self.judge(event)
            if verdict is not None:
                yield verdict
