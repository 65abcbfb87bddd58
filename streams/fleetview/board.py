"""The live fleet board: loop tallies from `loop-warnings` and `loop-episodes`, pure.

A loop is counted when its first warning arrives (key: session and rule, as the core keeps
at most one open episode per rule of a session) and is closed by its `loop-episodes`
record. A warning at or before the `last_seq` of its session's
and rule's closed episode belongs to that episode (the two topics are read in no set order).
Where no episodes topic exists (a worker that does not publish episodes yet), a loop is
taken as broken when its session is warned again after an event without a warning (a gap
in the warned `seq`s). A loop warned by no event for `QUIET_AFTER` of event time no longer
counts as open.

Time is event time (the warnings' `event_ts`, the episodes' `ended_at`), never the clock,
so the board is deterministic. Everything it keeps is bounded (caps below).
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from loopwatch.models import RULES, LoopEpisode, LoopVerdict, RuleName, broken_at_first_warning

OPEN_LOOPS_CAP = 10_000
"""Open loops tracked; at the cap the loop warned longest ago is dropped (not counted open)."""
SESSIONS_CAP = 20_000
"""Sessions whose last warned seq is remembered; the oldest is forgotten at the cap."""
LABELS_CAP = 500
"""Distinct agents / tools counted; further names are counted under OTHER."""
SEEN_EPISODES_CAP = 20_000
"""Episode ids remembered to drop redelivered records (at-least-once)."""
MINUTES = 30
"""Minutes of the loops-per-minute chart, at most (kept for the chart, no more)."""
MIN_MINUTES = 10
"""Minutes shown at least: a young board shows its few minutes, not a mostly empty half hour."""
RECENT = 20
"""Recent episodes listed."""
QUIET_AFTER = timedelta(minutes=2)
OTHER = "(other)"
TIME_TO_BREAK_BUCKETS: tuple[tuple[str, float], ...] = (
    ("< 1 s", 1),
    ("1-5 s", 5),
    ("5-15 s", 15),
    ("15-60 s", 60),
    ("1-5 min", 300),
    ("5-15 min", 900),
    ("> 15 min", float("inf")),
)
"""Label and upper bound (seconds, exclusive) of each time-to-break bar."""

LoopKey = tuple[str, str]


@dataclass
class OpenLoop:
    session_id: str
    agent_id: str | None
    rule: RuleName
    tool_names: tuple[str, ...]
    started_at: datetime
    last_at: datetime
    last_seq: int
    peak_count: int
    warnings: int = 1


class BoundedCounter:
    """A Counter of at most `cap` names; later names are counted under OTHER."""

    def __init__(self, cap: int = LABELS_CAP) -> None:
        self.cap = cap
        self.counts: Counter[str] = Counter()

    def add(self, name: str, n: int = 1) -> None:
        if name not in self.counts and len(self.counts) >= self.cap:
            name = OTHER
        self.counts[name] += n

    def top(self, n: int) -> list[tuple[str, int]]:
        return self.counts.most_common(n)


def minute_of(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def time_to_break_bucket(seconds: float) -> int:
    return next(i for i, (_, upper) in enumerate(TIME_TO_BREAK_BUCKETS) if seconds < upper)


class FleetBoard:
    """Tallies of the fleet's loops; `snapshot()` is what the page draws."""

    def __init__(self, episodes_expected: bool = True) -> None:
        self.episodes_expected = episodes_expected
        """False while there is no episodes topic: loop ends are then inferred."""
        self.warnings = 0
        self.loops = 0
        self.episodes = 0
        self.skipped = 0
        """Records that did not decode (counted, never fatal)."""
        self.latest: datetime | None = None
        self.version = 0
        """Goes up with every change, so a server sends a snapshot only when it changed."""
        self._open: OrderedDict[LoopKey, OpenLoop] = OrderedDict()
        self._last_warned_seq: OrderedDict[str, int] = OrderedDict()
        self._seen_episodes: OrderedDict[tuple[str, str, int], None] = OrderedDict()
        self._closed_through: OrderedDict[LoopKey, int] = OrderedDict()
        self._by_rule: Counter[str] = Counter()
        self._agents = BoundedCounter()
        self._tools = BoundedCounter()
        self._per_minute: dict[datetime, Counter[str]] = {}
        self._outcomes: Counter[str] = Counter()
        self._broken_first = 0
        self._time_to_break = [0] * len(TIME_TO_BREAK_BUCKETS)
        self._break_seconds: deque[float] = deque(maxlen=1000)
        self._recent: deque[dict[str, Any]] = deque(maxlen=RECENT)

    # -- input ------------------------------------------------------------------------

    def add_warning(self, verdict: LoopVerdict) -> None:
        warning = verdict.warning
        if warning is None:
            return
        self.warnings += 1
        self.version += 1
        self._see(verdict.event_ts)
        sid = verdict.session_id
        last = self._last_warned_seq.get(sid)
        if not self.episodes_expected and last is not None and verdict.seq > last + 1:
            self._close_session(sid)  # no episodes: an unwarned event came between
        self._last_warned_seq[sid] = max(verdict.seq, last or 0)
        self._last_warned_seq.move_to_end(sid)
        if len(self._last_warned_seq) > SESSIONS_CAP:
            self._last_warned_seq.popitem(last=False)
        key: LoopKey = (sid, warning.rule)
        if verdict.seq <= self._closed_through.get(key, -1):
            return  # a warning of an episode already closed (read after its record)
        loop = self._open.get(key)
        if loop is not None:
            if verdict.seq > loop.last_seq:  # a redelivered warning changes nothing
                loop.last_seq, loop.last_at = verdict.seq, verdict.event_ts
                loop.warnings += 1
                loop.peak_count = max(loop.peak_count, warning.count)
                loop.tool_names = warning.tool_names
            self._open.move_to_end(key)
            return
        self._open[key] = OpenLoop(
            sid,
            verdict.agent_id,
            warning.rule,
            warning.tool_names,
            verdict.event_ts,
            verdict.event_ts,
            verdict.seq,
            warning.count,
        )
        if len(self._open) > OPEN_LOOPS_CAP:
            self._open.popitem(last=False)
        self._count_start(warning.rule, verdict.agent_id, warning.tool_names, verdict.event_ts)

    def add_episode(self, episode: LoopEpisode) -> None:
        seen = (episode.session_id, episode.rule, episode.first_seq)
        if seen in self._seen_episodes:
            return
        self._seen_episodes[seen] = None
        if len(self._seen_episodes) > SEEN_EPISODES_CAP:
            self._seen_episodes.popitem(last=False)
        self.episodes += 1
        self.version += 1
        self._see(episode.ended_at)
        key: LoopKey = (episode.session_id, episode.rule)
        self._closed_through[key] = max(episode.last_seq, self._closed_through.get(key, -1))
        self._closed_through.move_to_end(key)
        if len(self._closed_through) > SEEN_EPISODES_CAP:
            self._closed_through.popitem(last=False)
        loop = self._open.get(key)
        if loop is not None and loop.last_seq <= episode.last_seq:
            del self._open[key]
        else:  # its warnings came before the page started reading, or come later
            self._count_start(
                episode.rule, episode.agent_id, episode.tool_names, episode.started_at
            )
        self._outcomes[episode.outcome] += 1
        if episode.outcome == "broken":
            self._broken_first += broken_at_first_warning(episode)
            self._time_to_break[time_to_break_bucket(episode.duration_seconds)] += 1
            self._break_seconds.append(episode.duration_seconds)
        self._recent.appendleft(episode_row(episode))

    def add_skipped(self) -> None:
        self.skipped += 1
        self.version += 1

    # -- output -----------------------------------------------------------------------

    def open_loops(self) -> list[OpenLoop]:
        """Loops not closed yet and warned within QUIET_AFTER of the latest event time."""
        if self.latest is None:
            return []
        horizon = self.latest - QUIET_AFTER
        return [loop for loop in reversed(self._open.values()) if loop.last_at >= horizon]

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able summary: everything the page shows."""
        open_loops = self.open_loops()
        closed = sum(self._outcomes.values())
        breaks = sorted(self._break_seconds)
        return {
            "latest": None if self.latest is None else self.latest.isoformat(),
            "totals": {
                "warnings": self.warnings,
                "loops": self.loops,
                "open": len(open_loops),
                "closed": closed,
                "episodes": self.episodes,
                "skipped": self.skipped,
            },
            "rules": list(RULES),
            "by_rule": {rule: self._by_rule[rule] for rule in RULES},
            "per_minute": self._per_minute_series(),
            "top_agents": self._agents.top(8),
            "top_tools": self._tools.top(8),
            "outcomes": dict(self._outcomes),
            "broken_first": {"loops": self._broken_first, "closed": closed},
            "time_to_break": {
                "labels": [label for label, _ in TIME_TO_BREAK_BUCKETS],
                "counts": list(self._time_to_break),
                "median_seconds": breaks[len(breaks) // 2] if breaks else None,
            },
            "open_loops": [open_row(loop) for loop in open_loops[:10]],
            "recent": list(self._recent),
        }

    # -- internals --------------------------------------------------------------------

    def _see(self, moment: datetime) -> None:
        if self.latest is None or moment > self.latest:
            self.latest = moment

    def _count_start(
        self, rule: str, agent_id: str | None, tools: tuple[str, ...], at: datetime
    ) -> None:
        self.loops += 1
        self._by_rule[rule] += 1
        self._agents.add(agent_id or "(no agent id)")
        for tool in tools:
            self._tools.add(tool)
        minute = minute_of(at)
        self._per_minute.setdefault(minute, Counter())[rule] += 1
        if len(self._per_minute) > MINUTES:
            del self._per_minute[min(self._per_minute)]

    def _close_session(self, session_id: str) -> None:
        for key in [key for key in self._open if key[0] == session_id]:
            del self._open[key]

    def _per_minute_series(self) -> dict[str, Any]:
        if self.latest is None:
            return {"minutes": [], "series": {rule: [] for rule in RULES}}
        end = minute_of(self.latest)
        first = min(self._per_minute, default=end)
        span = int((end - first).total_seconds() // 60) + 1
        shown = min(max(span, MIN_MINUTES), MINUTES)
        minutes = [end - timedelta(minutes=i) for i in range(shown - 1, -1, -1)]
        return {
            "minutes": [m.strftime("%H:%M") for m in minutes],
            "series": {
                rule: [self._per_minute.get(m, Counter())[rule] for m in minutes] for rule in RULES
            },
        }


def episode_row(episode: LoopEpisode) -> dict[str, Any]:
    """An episode as the page lists it: names and numbers, no subject digest."""
    return {
        "session_id": episode.session_id,
        "agent_id": episode.agent_id,
        "rule": episode.rule,
        "tool_names": list(episode.tool_names),
        "outcome": episode.outcome,
        "peak_count": episode.peak_count,
        "warnings": episode.warnings,
        "warned_calls": episode.warned_calls,
        "duration_seconds": episode.duration_seconds,
        "ended_at": episode.ended_at.isoformat(),
    }


def open_row(loop: OpenLoop) -> dict[str, Any]:
    return {
        "session_id": loop.session_id,
        "agent_id": loop.agent_id,
        "rule": loop.rule,
        "tool_names": list(loop.tool_names),
        "peak_count": loop.peak_count,
        "warnings": loop.warnings,
        "started_at": loop.started_at.isoformat(),
    }
