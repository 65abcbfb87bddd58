"""What the `sessions` table stores per session: the detector snapshot plus the verdicts
whose delivery is not yet confirmed, so a replay after a crash can send them again.

Why the unconfirmed verdicts: the table's changelog record and the verdict record are two
sends to two partitions; a crash can land the state but lose the verdict. Replayed events
are then duplicates by `seq` and would never get their verdict. Keeping each verdict in
the stored value until its send is acknowledged closes that gap (see README, delivery).

Two formats, both read (docs/performance.md §4):

* version 1, written before issue 33: one JSON document (`{"v":1,...}`);
* version 2: an 18-byte header, then the JSON document without what the header holds.
  The header puts what the expiry index needs at a fixed place, so a table recovery
  reads it from each changelog record without decoding the record (`record_times`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import orjson
import pydantic_core

from loopwatch.streams.detector import SessionState
from loopwatch.streams.kafka.expiry import epoch_seconds

JSON_VERSION = 1
"""The `v` of a version 1 record (all JSON)."""
RECORD_VERSION = 2
"""The first byte of a version 2 record (a JSON record starts with `{`)."""
HEADER = struct.Struct("<BBdd")
"""version 2's header: version, flags, seen_at, seen_wall (0.0 when absent)."""
_ENDED, _SEEN, _WALL = 1, 2, 4
"""Header flags: the session ended (no state); `seen` and `seen_wall` are present."""


class RecordTimes(NamedTuple):
    """What the expiry index reads of a stored record (`SessionRecord` has them too)."""

    seen_at: float
    ended: bool
    seen_wall: float | None


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
        """Version 2: the header, then the record's JSON (without the header's fields)."""
        state = self.state
        snapshot = None if state is None else state.to_snapshot(copy=False)
        document: dict[str, Any] = {
            "state": snapshot,
            "last_seq": self.last_seq,
            # the state's text when it holds the same datetime (as the pipeline's records
            # do): `isoformat()` asks pydantic's tzinfo for the offset, ~1.5 us a call
            "last_ts": snapshot["last_ts"]
            if snapshot is not None and state is not None and state.last_ts is self.last_ts
            else self.last_ts.isoformat(),
        }
        if self.unconfirmed:  # (absent: none)
            document["unconfirmed"] = [[seq, p.decode()] for seq, p in self.unconfirmed]
        if self.unconfirmed_episodes:
            document["episodes"] = [[seq, p.decode()] for seq, p in self.unconfirmed_episodes]
        flags = (
            (_ENDED if self.state is None else 0)
            | (0 if self.seen is None else _SEEN)
            | (0 if self.seen_wall is None else _WALL)
        )
        wall = 0.0 if self.seen_wall is None else self.seen_wall
        header = HEADER.pack(RECORD_VERSION, flags, self.seen_at, wall)
        return header + _json_bytes(document)

    @classmethod
    def decode(cls, data: bytes) -> SessionRecord:
        if data[:1] == b"{":
            return cls._from_document(_json_document(data), seen=None, wall=None)
        _, flags, seen, wall = _header(data)
        document = _json_document(data[HEADER.size :], version_1=False)
        return cls._from_document(
            document,
            seen=seen if flags & _SEEN else None,
            wall=wall if flags & _WALL else None,
        )

    @classmethod
    def _from_document(
        cls, document: dict[str, Any], *, seen: float | None, wall: float | None
    ) -> SessionRecord:
        """A record from its JSON document: version 1's whole (`seen`, `wall`: None,
        read from it), version 2's after its header."""
        if seen is None and document.get("seen") is not None:
            seen = float(document["seen"])
        if wall is None and document.get("wall") is not None:
            wall = float(document["wall"])
        snapshot = document["state"]
        state = None if snapshot is None else SessionState.from_snapshot(snapshot)
        text = document["last_ts"]
        return cls(
            state=state,
            last_seq=int(document["last_seq"]),
            # the state's datetime when the texts are the same (as written from the
            # pipeline's records): one parse, and `encode` then reuses the text
            last_ts=state.last_ts
            if state is not None and snapshot["last_ts"] == text
            else datetime.fromisoformat(text),
            unconfirmed=tuple(
                (int(seq), str(p).encode()) for seq, p in document.get("unconfirmed", ())
            ),
            unconfirmed_episodes=tuple(
                (int(seq), str(p).encode()) for seq, p in document.get("episodes", ())
            ),
            seen=seen,
            seen_wall=wall,
        )


def record_times(data: bytes) -> RecordTimes:
    """What the expiry index needs of a stored record, without decoding its state:
    version 2 from its header, version 1 from its JSON."""
    if data[:1] == b"{":
        document = _json_document(data)
        seen, wall = document.get("seen"), document.get("wall")
        return RecordTimes(
            epoch_seconds(datetime.fromisoformat(document["last_ts"]))
            if seen is None
            else float(seen),
            document["state"] is None,
            None if wall is None else float(wall),
        )
    _, flags, seen_at, wall = _header(data)
    return RecordTimes(seen_at, bool(flags & _ENDED), wall if flags & _WALL else None)


def _header(data: bytes) -> tuple[int, int, float, float]:
    if len(data) < HEADER.size or data[0] != RECORD_VERSION:
        raise ValueError(f"unknown session record version {data[:1]!r}")
    version, flags, seen, wall = HEADER.unpack_from(data)
    return version, flags, seen, wall


def _json_bytes(document: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON (as json.dumps(separators=(",", ":"), ensure_ascii=False)).

    orjson's, ~3x pydantic-core's on these records and byte for byte the same
    (tests/unit/worker/test_record_json.py); pydantic-core's for what orjson refuses, an
    integer beyond 64 bits (an event's `seq` has no upper bound).
    """
    try:
        return orjson.dumps(document)
    except TypeError:  # orjson.JSONEncodeError
        return pydantic_core.to_json(document)


def _json_document(data: bytes, *, version_1: bool = True) -> dict[str, Any]:
    """A record's JSON; version 1's must say so (`"v": 1`). orjson's parser (faster),
    pydantic-core's for what orjson refuses (integers beyond 64 bits) and for the error."""
    try:
        document = orjson.loads(data)
    except ValueError:  # orjson.JSONDecodeError
        try:
            document = pydantic_core.from_json(data)
        except ValueError as exc:  # pydantic-core's error for invalid JSON is a ValueError
            raise ValueError(f"session record is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ValueError("session record is not a JSON object")
    if version_1 and document.get("v") != JSON_VERSION:
        raise ValueError(f"unknown session record version {document.get('v')!r}")
    return document
