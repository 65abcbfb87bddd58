"""What the `sessions` table stores per session: the detector snapshot plus the verdicts
whose delivery is not yet confirmed, so a replay after a crash can send them again.

Why the unconfirmed verdicts: the table's changelog record and the verdict record are two
sends to two partitions; a crash can land the state but lose the verdict. Replayed events
are then duplicates by `seq` and would never get their verdict. Keeping each verdict in
the stored value until its send is acknowledged closes that gap (see README, delivery).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pydantic_core

from loopwatch.streams.detector import SessionState
from loopwatch.streams.kafka.expiry import epoch_seconds

RECORD_VERSION = 1

Unconfirmed = tuple[tuple[int, bytes], ...]
"""(seq, JSON payload) of records sent for that event but not all acknowledged yet."""


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class SessionRecord:
    """One table value. `state` is None once the session ended (kept briefly so replays
    of its events stay duplicates; then deleted, see `expiry`)."""

    state: SessionState | None
    last_seq: int
    last_ts: datetime
    unconfirmed: Unconfirmed = ()
    """(seq, verdict JSON) of verdicts sent but not yet acknowledged by the broker."""
    unconfirmed_episodes: Unconfirmed = ()
    """(seq, episode JSON) of loop episodes closed by that event whose sends are not yet
    all acknowledged (kept and resent like the verdict of the same seq)."""
    seen: float | None = None
    """The partition's log clock (epoch seconds) when this record was written: the idle
    sweep's deadline counts from it (`streams.kafka.expiry`). None in records written
    before contract 1.2: `last_ts` stands in for it."""
    seen_wall: float | None = None
    """The worker's clock (epoch seconds) when this record was written: the sweep waits
    for a TTL of it too. None in records written before contract 1.2 (no such wait)."""

    @property
    def seen_at(self) -> float:
        """When the sweep counts the session as last seen (epoch seconds)."""
        return epoch_seconds(self.last_ts) if self.seen is None else self.seen

    @property
    def ended(self) -> bool:
        return self.state is None

    def unconfirmed_verdict(self, seq: int) -> bytes | None:
        for stored_seq, payload in self.unconfirmed:
            if stored_seq == seq:
                return payload
        return None

    def unconfirmed_episodes_of(self, seq: int) -> tuple[bytes, ...]:
        return tuple(payload for stored, payload in self.unconfirmed_episodes if stored == seq)

    def encode(self) -> bytes:
        document: dict[str, Any] = {
            "v": RECORD_VERSION,
            "state": None if self.state is None else self.state.to_snapshot(copy=False),
            "last_seq": self.last_seq,
            "last_ts": self.last_ts.isoformat(),
            "unconfirmed": [[seq, payload.decode()] for seq, payload in self.unconfirmed],
        }
        if self.seen is not None:
            document["seen"] = self.seen
        if self.seen_wall is not None:
            document["wall"] = self.seen_wall
        if self.unconfirmed_episodes:  # absent in most values (and in older ones)
            document["episodes"] = [[seq, p.decode()] for seq, p in self.unconfirmed_episodes]
        # pydantic-core's encoder: compact JSON like json.dumps(separators=(",", ":")) but
        # UTF-8 rather than \u escapes, and several times faster (it runs on every event).
        return pydantic_core.to_json(document)

    @classmethod
    def decode(cls, data: bytes) -> SessionRecord:
        try:
            document = pydantic_core.from_json(data)
        except ValueError as exc:  # pydantic-core's error for invalid JSON is a ValueError
            raise ValueError(f"session record is not JSON: {exc}") from exc
        if document.get("v") != RECORD_VERSION:
            raise ValueError(f"unknown session record version {document.get('v')!r}")
        snapshot = document["state"]
        return cls(
            state=None if snapshot is None else SessionState.from_snapshot(snapshot),
            last_seq=int(document["last_seq"]),
            last_ts=datetime.fromisoformat(document["last_ts"]),
            unconfirmed=tuple((int(seq), str(p).encode()) for seq, p in document["unconfirmed"]),
            unconfirmed_episodes=tuple(
                (int(seq), str(p).encode()) for seq, p in document.get("episodes", ())
            ),
            seen=None if document.get("seen") is None else float(document["seen"]),
            seen_wall=None if document.get("wall") is None else float(document["wall"]),
        )
