"""Loop episodes (docs/contract.md §8): from a rule's first warning for a subject to the
completed tool step in which that rule no longer fires for it, the session's end, or the
state's expiry.

Pure and O(1) per event: a session has at most one open episode per rule (`len(RULES)` in
all) and remembers the unanswered call ids of its newest tool step (at most
`MAX_PENDING_CALLS`). The worker and the scanner turn closed episodes into `LoopEpisode`
records; nothing here holds content, only rule names, tool names, digests and counts.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loopwatch.models import (
    AgentEvent,
    EpisodeOutcome,
    LoopEpisode,
    LoopWarning,
    RuleName,
    SessionEnd,
)

MAX_PENDING_CALLS = 64
"""Distinct call ids of one tool step awaited for its completion. A step with more calls
completes once its first 64 distinct ids are answered (a bigger parallel batch is rare
and only makes the step count as completed a little early)."""


# LoopEpisode(...) with the same validation, without BaseModel.__init__'s overhead.
_validate_episode = LoopEpisode.__pydantic_validator__.validate_python


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class OpenEpisode:
    """An episode still going on: what its warnings said so far."""

    rule: RuleName
    subject: str
    """Digest of what repeats (see `streams.detector.core.rule_subject`)."""
    tool_names: tuple[str, ...]
    """The tool names of its first warning."""
    agent_id: str | None
    """The newest agent id among its warned events."""
    first_seq: int
    started_at: datetime
    last_seq: int
    """The seq of its newest warning."""
    last_at: datetime
    peak_count: int
    warnings: int
    calls: int = 0
    """Assistant messages (model calls) processed after its first warned event: each saw
    a warning of it."""
    level: int = 1
    """The highest escalation level its warnings reached (contract §9.13)."""

    def close(
        self, session_id: str, outcome: EpisodeOutcome, seq: int, at: datetime, agent_id: str | None
    ) -> LoopEpisode:
        episode: LoopEpisode = _validate_episode(
            {
                "session_id": session_id,
                "agent_id": agent_id if agent_id is not None else self.agent_id,
                "rule": self.rule,
                "subject": self.subject,
                "tool_names": self.tool_names,
                "first_seq": self.first_seq,
                "last_seq": seq,
                "started_at": self.started_at,
                "ended_at": at,
                "peak_count": self.peak_count,
                "warnings": self.warnings,
                "outcome": outcome,
                "duration_seconds": max(0.0, (at - self.started_at).total_seconds()),
                "warned_calls": self.calls,
            }
        )
        return episode

    def expire(self, session_id: str) -> LoopEpisode:
        """Closed because the session's state expired: it ends at its last warning."""
        return self.close(session_id, "expired", self.last_seq, self.last_at, None)

    def to_snapshot(self) -> list[Any]:
        return [
            self.rule,
            self.subject,
            list(self.tool_names),
            self.agent_id,
            self.first_seq,
            self.started_at.isoformat(),
            self.last_seq,
            self.last_at.isoformat(),
            self.peak_count,
            self.warnings,
        ]

    @classmethod
    def from_snapshot(cls, item: list[Any], extra: list[Any] | None = None) -> OpenEpisode:
        """`to_snapshot`'s list; `extra`: its [calls, level] (the state's `episode_calls`,
        absent when every open episode has none, and in snapshots from before them)."""
        rule, subject, tools, agent, first, started, last, last_at, peak, warnings = item[:10]
        return cls(
            rule=rule,
            subject=str(subject),
            tool_names=tuple(tools),
            agent_id=agent,
            first_seq=int(first),
            started_at=datetime.fromisoformat(started),
            last_seq=int(last),
            last_at=datetime.fromisoformat(last_at),
            peak_count=int(peak),
            warnings=int(warnings),
            calls=0 if extra is None else int(extra[0]),
            level=1 if extra is None else int(extra[1]),
        )


def call_id_checksum(call_id: str) -> int:
    """What the state keeps of an awaited call id: its CRC-32 (cheap; telling a step's
    own few ids apart is all it is for, and it keeps the raw id out of the state)."""
    return zlib.crc32(call_id.encode("utf-8"))


def pending_calls(pending: tuple[int, ...], event: AgentEvent) -> tuple[tuple[int, ...], bool]:
    """The newest tool step's unanswered call ids (checksums) after `event`, and whether
    `event` completed that step (it answered the last of them).

    Every assistant message replaces the set (a text step empties it: nothing to await);
    a tool result removes its call id when the step awaits it. Boundaries leave it alone.
    """
    if event.type == "tool_result":  # (the discriminator: cheaper than isinstance)
        if pending:
            answered = call_id_checksum(event.call_id)
            if answered in pending:
                # (one awaited call, the usual case: nothing is left)
                rest = (
                    tuple([item for item in pending if item != answered])
                    if len(pending) > 1
                    else ()
                )
                return rest, not rest
        return pending, False
    if event.type == "assistant_message":
        calls = event.tool_calls
        if len(calls) == 1:
            return (call_id_checksum(calls[0].id),), False
        ids = dict.fromkeys(call_id_checksum(call.id) for call in calls)
        return tuple(ids)[:MAX_PENDING_CALLS], False
    return pending, False


def _called(e: OpenEpisode) -> OpenEpisode:
    return OpenEpisode(
        e.rule, e.subject, e.tool_names, e.agent_id, e.first_seq, e.started_at,
        e.last_seq, e.last_at, e.peak_count, e.warnings, e.calls + 1, e.level,
    )  # fmt: skip


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class EpisodeChanges:
    """What one event did to a session's episodes."""

    open: tuple[OpenEpisode, ...]
    """The episodes open after the event, at most one per rule, in rule order."""
    opened: tuple[OpenEpisode, ...]
    closed: tuple[LoopEpisode, ...]
    """Closed by this event, in rule order (a rule can close two: the one a warning for
    a new subject displaced, and at `session_end` that new one)."""


def track(
    open_episodes: tuple[OpenEpisode, ...],
    event: AgentEvent,
    warning: LoopWarning | None,
    *,
    completed_step: bool,
    subject_of: Callable[[RuleName], str | None],
    rule_order: tuple[RuleName, ...],
    level: int = 1,
) -> EpisodeChanges | None:
    """Apply one processed event to the open episodes (contract §8).

    1. The event's warning (rule R, subject S): the open episode of R with subject S
       counts it; an open episode of R with another subject is closed `broken` and a new
       one opened; with none open for R, one is opened.
    0. An assistant message is a model call that saw the open episodes' warnings: each
       counts it (`calls`).
    2. If the event completed a tool step: every open episode whose rule does not fire
       for its subject now (`subject_of(rule)` is None or another subject) is closed
       `broken`.
    3. At `session_end` every open episode is closed `session_ended`.

    None when nothing changed (most events: no warning, and no open episode or nothing
    that could end one).
    """
    model_call = event.type == "assistant_message"
    if warning is None and (
        not open_episodes
        or (not completed_step and not model_call and not isinstance(event, SessionEnd))
    ):
        return None
    if model_call and open_episodes:  # a model call that saw their warnings
        open_episodes = tuple([_called(episode) for episode in open_episodes])
    by_rule = {episode.rule: episode for episode in open_episodes}
    closed: list[LoopEpisode] = []
    opened: list[OpenEpisode] = []
    sid, seq, ts, agent = event.session_id, event.seq, event.ts, event.agent_id

    if warning is not None:
        subject = subject_of(warning.rule)
        if subject is None:  # cannot happen: the warned rule fires; keep the record honest
            raise ValueError(f"rule {warning.rule} warned without a subject")
        current = by_rule.get(warning.rule)
        if current is not None and current.subject == subject:
            by_rule[warning.rule] = OpenEpisode(
                current.rule,
                subject,
                current.tool_names,
                agent if agent is not None else current.agent_id,
                current.first_seq,
                current.started_at,
                seq,
                ts,
                max(current.peak_count, warning.count),
                current.warnings + 1,
                current.calls,
                max(current.level, level),
            )
        else:
            if current is not None:
                closed.append(current.close(sid, "broken", seq, ts, agent))
            # rule, subject, tool_names, agent_id, first_seq, started_at, last_seq, last_at,
            # peak_count, warnings (positional: keywords cost more, on every warning)
            fresh = OpenEpisode(
                warning.rule, subject, warning.tool_names, agent, seq, ts, seq, ts, warning.count, 1
            )
            fresh.level = level
            by_rule[warning.rule] = fresh
            opened.append(fresh)

    if completed_step:
        for rule, episode in list(by_rule.items()):
            if subject_of(rule) != episode.subject:
                closed.append(episode.close(sid, "broken", seq, ts, agent))
                del by_rule[rule]

    if isinstance(event, SessionEnd):
        closed.extend(
            episode.close(sid, "session_ended", seq, ts, agent) for episode in by_rule.values()
        )
        by_rule = {}

    # rule order; a rule's displaced episode before the one that replaced it
    still_open = tuple([by_rule[rule] for rule in rule_order if rule in by_rule]) if by_rule else ()
    if closed:
        closed.sort(key=lambda e: (rule_order.index(e.rule), e.first_seq))
    return EpisodeChanges(still_open, tuple(opened), tuple(closed))
