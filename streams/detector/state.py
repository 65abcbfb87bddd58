"""Per-session detector state: digests and small counters, never raw conversation.

What every rule needs (the newest seq and time, the recent calls for resolving results)
is kept here; each rule's own part is owned by its tracker (`streams.detector.rules`).
Size caps (what happens at each is said beside it) keep a snapshot bounded however long
a session runs; the snapshot is a plain JSON-able dict carrying `version`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from loopwatch.streams.detector.episodes import OpenEpisode
from loopwatch.streams.detector.rules import ALL_RULES, SEED_RULES, RuleSet

STATE_VERSION = 2
"""2 added loop episodes (`step`, `episodes`, `loops`); version 1 snapshots still load
(no open episodes, no awaited step)."""
READABLE_VERSIONS = (1, 2)

MAX_REMEMBERED_CALLS = 64
"""Call ids remembered for resolving results to calls (results follow their calls
closely; 64 covers a parallel batch of 64 calls). At the cap the oldest call is
forgotten; a result answering a forgotten call has no signature and matches nothing.
The stream app writes the snapshot back after every event, so this cap is most of its
size: ~4.5 KB at the cap instead of ~18 KB at 256."""


def _episodes(snapshot: dict[str, Any]) -> tuple[OpenEpisode, ...]:
    items = snapshot.get("episodes", ())
    extras = snapshot.get("episode_calls")
    if extras is None:
        return tuple(OpenEpisode.from_snapshot(item) for item in items)
    return tuple(
        OpenEpisode.from_snapshot(item, extra) for item, extra in zip(items, extras, strict=True)
    )


@dataclass(slots=True)
class SessionState:
    """Rolling state of one session. Treat as immutable: `observe` returns a new one."""

    last_seq: int
    """The seq of the newest processed event; lower or equal seqs are skipped."""
    last_ts: datetime
    """Event time of the newest processed event (drives idle-session expiry)."""
    calls: dict[str, str] = field(default_factory=dict)
    """Recent call id digest → call fingerprint digest, oldest first (replaced, never
    mutated)."""
    parts: list[Any] = field(default_factory=SEED_RULES.empty_parts)
    """One immutable part per tracker of `rules`, in `rules.trackers` order."""
    rules: RuleSet = SEED_RULES
    """The rules this state is kept for: the part of `ALL_RULES` the config judging the
    session runs (`observe` switches it when the config changes, docs/contract.md §9.1),
    or a set the caller chose."""

    # Loop episodes (streams.detector.episodes): bounded by one open episode per rule.
    step_pending: tuple[int, ...] = ()
    """Checksums of the newest tool step's call ids still awaiting a result."""
    episodes: tuple[OpenEpisode, ...] = ()
    """Open loop episodes, at most one per rule, in rule order."""
    loops: int = 0
    """Episodes this session has opened so far."""
    mode: str = ""
    """How its result-reading parts compare results (`DetectionConfig.result_mode`: ""
    is docs/contract.md §3; a change restarts those parts, §9.9)."""

    def copy(self) -> SessionState:
        """A shallow copy: the parts list is new, the parts and `calls` are shared."""
        return SessionState(
            self.last_seq,
            self.last_ts,
            self.calls,
            self.parts.copy(),
            self.rules,
            self.step_pending,
            self.episodes,
            self.loops,
            self.mode,
        )

    def comparing(self, mode: str) -> SessionState:
        """A copy whose result-reading parts (trackers with `reads_signatures`) start
        again from empty, comparing results as `mode` says (contract §9.9)."""
        return SessionState(
            self.last_seq,
            self.last_ts,
            self.calls,
            [
                tracker.empty() if tracker.reads_signatures else part
                for tracker, part in zip(self.rules.trackers, self.parts, strict=True)
            ],
            self.rules,
            self.step_pending,
            self.episodes,
            self.loops,
            mode,
        )

    def keeping(self, rules: RuleSet) -> SessionState:
        """A copy kept for `rules`: the parts of the trackers both sets have are carried
        over, a tracker new to this state starts from its empty part, and the parts of
        trackers `rules` lacks are dropped."""
        parts = dict(zip(self.rules.trackers, self.parts, strict=True))
        return SessionState(
            self.last_seq,
            self.last_ts,
            self.calls,
            [parts[tracker] if tracker in parts else tracker.empty() for tracker in rules.trackers],
            rules,
            self.step_pending,
            self.episodes,
            self.loops,
            self.mode,
        )

    def to_snapshot(self, *, copy: bool = True) -> dict[str, Any]:
        """A plain JSON-able dict (what the stream app's table stores): the common fields,
        then each tracker's part under its key.

        `copy=False` shares this state's dicts instead of copying them, for a caller
        that only encodes the snapshot at once (the table write, on every event).
        """
        snapshot: dict[str, Any] = {
            "version": STATE_VERSION,
            "last_seq": self.last_seq,
            "last_ts": self.last_ts.isoformat(),
            "calls": dict(self.calls) if copy else self.calls,
        }
        for tracker, part in zip(self.rules.trackers, self.parts, strict=True):
            snapshot[tracker.key] = tracker.to_snapshot(part, copy=copy)
        snapshot["step"] = list(self.step_pending)
        snapshot["episodes"] = [episode.to_snapshot() for episode in self.episodes]
        if any(episode.calls or episode.level > 1 for episode in self.episodes):
            # beside the episodes, not in their items: a reader from before issue 31
            # ignores the key (and a snapshot without it has none)
            snapshot["episode_calls"] = [[e.calls, e.level] for e in self.episodes]
        snapshot["loops"] = self.loops
        if self.mode:  # absent when results compare by §3 (the seed's snapshot unchanged)
            snapshot["mode"] = self.mode
        return snapshot

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any], rules: RuleSet | None = None) -> SessionState:
        """Rebuild from `to_snapshot()`; raises ValueError for an unknown version.

        Without `rules`, the state is kept for the trackers of `ALL_RULES` whose keys the
        snapshot has (what the session kept when it was written). With `rules`, a tracker
        whose key the snapshot lacks (it was written before that tracker existed, or
        while no rule read it) starts from its empty part.
        """
        version = snapshot.get("version")
        if version not in READABLE_VERSIONS:
            raise ValueError(f"unsupported session state version {version!r}")
        if rules is None:
            rules = _kept_by_keys(tuple(snapshot))
            # (every tracker of `rules` has its key in the snapshot)
            parts = [tracker.from_snapshot(snapshot[tracker.key]) for tracker in rules.trackers]
        else:
            parts = [
                tracker.from_snapshot(snapshot[tracker.key])
                if tracker.key in snapshot
                else tracker.empty()
                for tracker in rules.trackers
            ]
        return cls(
            int(snapshot["last_seq"]),
            datetime.fromisoformat(snapshot["last_ts"]),
            dict(snapshot["calls"]),
            parts,
            rules,
            tuple([int(item) for item in snapshot.get("step", ())]),
            _episodes(snapshot),
            int(snapshot.get("loops", 0)),
            str(snapshot.get("mode", "")),
        )


@lru_cache(maxsize=256)
def _kept_by_keys(keys: tuple[str, ...]) -> RuleSet:
    """The part of `ALL_RULES` whose trackers' keys are among a snapshot's `keys`,
    remembered per key list (snapshots are written with few distinct ones): a cold
    session's record is decoded at each of its events (docs/performance.md, "The
    pipeline's CPU, third cut"). Pure: the cache changes the cost only
    (`RuleSet.keeping` gives the same set object for the same trackers)."""
    present = frozenset(keys)
    return ALL_RULES.keeping([tracker for tracker in ALL_RULES.trackers if tracker.key in present])
