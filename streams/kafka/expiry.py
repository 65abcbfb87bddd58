"""Which sessions to delete: idle ones after the TTL, ended ones after a short retention
(kept so replayed events of an ended session stay duplicates). docs/contract.md §8.5.

Two clocks, so that a session receiving events is never deleted by them:

* A session's own idleness is measured in its own event time by the pipeline (an event
  more than the TTL after the session's previous one resets its state, `state_reset`),
  the same rule `loopwatch scan` applies offline.
* The sweep that deletes sessions which never come back runs on a per-partition *log
  clock*: the newest Kafka record timestamp the partition has shown, never ahead of the
  worker's own clock (`advance`). A session's deadline is the TTL after the log clock at
  its last event, never after its event `ts`: an old-stamped session that is receiving
  events is as fresh as any other, and a far-future `ts` moves nothing.

Sweeping happens while processing a record of that partition, which is where faust lets
the agent write the table (the deleted key lives in the same partition).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any, TypeVar

from pydantic_core import TzInfo

_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCHS: dict[tzinfo, datetime] = {}
"""The Unix epoch expressed in each fixed-offset zone seen (cleared at 256)."""


def epoch_seconds(ts: datetime) -> float:
    """`ts.timestamp()`: the same float, at about half the cost for the fixed-offset
    zones events are decoded with. Aware datetimes with the same tzinfo object subtract
    without asking it for their offsets; `timestamp()` subtracts the UTC epoch, which
    calls pydantic's tzinfo. For a fixed offset o, `ts` minus the epoch
    in ts's own zone is ts's UTC time minus the epoch, to the microsecond, and
    `total_seconds()` divides those microseconds as `timestamp()` does."""
    zone = ts.tzinfo
    if (type(zone) is TzInfo or type(zone) is timezone) and type(ts) is datetime:
        epoch = _EPOCHS.get(zone)
        if epoch is None:  # (an equal zone's epoch with another tzinfo object: still exact)
            if len(_EPOCHS) >= 256:
                _EPOCHS.clear()
            epoch = _EPOCHS[zone] = _UNIX_EPOCH.astimezone(zone)
        return (ts - epoch).total_seconds()
    return ts.timestamp()  # naive (local time), a zone whose offset may change, a subclass


def idle_past(last_ts: datetime, ts: datetime, idle_ttl: float) -> bool:
    """The per-session rule (docs/contract.md §8.5): an event stamped more than the TTL
    after its session's previous event finds that session's state expired. Only the
    session's own timestamps count, so live and `loopwatch scan` agree; an event stamped
    before the previous one is never a gap."""
    return epoch_seconds(ts) - epoch_seconds(last_ts) > idle_ttl


@dataclass
class _PartitionIndex:
    deadlines: dict[str, float] = field(default_factory=dict)
    heap: list[tuple[float, str]] = field(default_factory=list)
    """(deadline, session) with stale entries skipped lazily; rebuilt when it grows."""
    clock: float = float("-inf")


class ExpiryIndex:
    """Deadlines of the sessions of each partition this worker holds."""

    def __init__(self, idle_ttl: timedelta, ended_retention: timedelta) -> None:
        self._idle_ttl = idle_ttl.total_seconds()
        self._ended_retention = ended_retention.total_seconds()
        self._partitions: dict[int, _PartitionIndex] = {}

    @property
    def idle_ttl(self) -> float:
        """The idle TTL in seconds (the pipeline's per-session rule uses it too)."""
        return self._idle_ttl

    def advance(self, partition: int, log_time: float | None, now: float) -> float:
        """Move the partition's log clock to a record's Kafka timestamp `log_time`, at most
        to `now` (the worker's clock: a producer whose clock runs ahead cannot push the
        sweep forward) and never back (an old timestamp moves nothing). Returns the clock,
        the time a session touched by this record was last seen. A record without a
        timestamp (None) counts as stamped `now`."""
        index = self._partitions.get(partition)
        if index is None:
            index = self._partitions[partition] = _PartitionIndex()
        bounded = now if log_time is None or log_time > now else log_time
        index.clock = max(index.clock, bounded)
        return index.clock

    def clock(self, partition: int) -> float:
        """The partition's log clock (-inf before its first record)."""
        index = self._partitions.get(partition)
        return float("-inf") if index is None else index.clock

    def touch(self, partition: int, session_id: str, seen: datetime, *, ended: bool) -> None:
        """`touch_at` with a datetime."""
        self.touch_at(partition, session_id, epoch_seconds(seen), ended=ended)

    def touch_at(self, partition: int, session_id: str, last: float, *, ended: bool) -> None:
        """Record when a session was last seen, on the partition's log clock (epoch
        seconds: the clock `advance` returned, or a stored record's `seen` read back from
        the changelog). The partition has seen that time, so its clock moves there too: a
        worker that rebuilds the index after a crash starts from the clock the crashed one
        had (as far as the records read back tell)."""
        index = self._partitions.get(partition)
        if index is None:  # (not setdefault: it would build an index on every call)
            index = self._partitions[partition] = _PartitionIndex()
        index.clock = max(index.clock, last)
        deadline = last + (self._ended_retention if ended else self._idle_ttl)
        index.deadlines[session_id] = deadline
        heapq.heappush(index.heap, (deadline, session_id))
        if len(index.heap) > 2 * len(index.deadlines) + 1024:
            index.heap = [(d, s) for s, d in index.deadlines.items()]
            heapq.heapify(index.heap)

    def forget(self, partition: int, session_id: str) -> None:
        index = self._partitions.get(partition)
        if index is not None:
            index.deadlines.pop(session_id, None)

    def drop_partition(self, partition: int) -> None:
        """The partition went to another worker."""
        self._partitions.pop(partition, None)

    def sessions(self) -> int:
        return sum(len(index.deadlines) for index in self._partitions.values())

    def due(self, partition: int, clock: datetime) -> list[str]:
        """`due_at` with a datetime."""
        return self.due_at(partition, epoch_seconds(clock))

    def due_at(self, partition: int, now: float) -> list[str]:
        """Advance the partition's clock to `now` (epoch seconds, normally what `advance`
        returned); return the sessions past their deadline (and forget them)."""
        index = self._partitions.get(partition)
        if index is None:
            return []
        index.clock = max(index.clock, now)
        expired: list[str] = []
        while index.heap and index.heap[0][0] < index.clock:
            deadline, session_id = heapq.heappop(index.heap)
            if index.deadlines.get(session_id) == deadline:
                del index.deadlines[session_id]
                expired.append(session_id)
        return expired


Stored = TypeVar("Stored")


def index_changelog_record(
    index: ExpiryIndex,
    message: Any,
    decode: Callable[[bytes], Stored],
    touch: Callable[[int, str, Stored], None],
) -> None:
    """One record of a table's changelog, read while the table recovers: a tombstone
    forgets its session; a stored value is decoded and handed to `touch` with its
    partition and session id. A value that does not decode is passed over: the table
    keeps it, and the session's next event writes it anew."""
    session_id = message.key.decode() if message.key else ""
    if message.value is None:
        index.forget(message.partition, session_id)
        return
    try:
        stored = decode(message.value)
    except (ValueError, KeyError, TypeError):
        return
    touch(message.partition, session_id, stored)
