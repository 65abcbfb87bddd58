"""Which sessions to delete, by event time: idle ones after the TTL, ended ones after a
short retention (kept so replayed events of an ended session stay duplicates).

Time is event time per partition: a partition's clock is the newest event `ts` it has seen,
so expiry happens while processing an event of that partition, which is where faust lets
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

    def touch(self, partition: int, session_id: str, last_ts: datetime, *, ended: bool) -> None:
        """Record a session's newest event time (from an agent write or the changelog).
        The partition has seen that time, so its clock moves there too: a worker that
        rebuilds the index from the changelog after a crash then starts from the clock
        the crashed one had (as far as the records read back tell), and a replayed older
        event finds expired what the first worker found expired."""
        self.touch_at(partition, session_id, epoch_seconds(last_ts), ended=ended)

    def touch_at(self, partition: int, session_id: str, last: float, *, ended: bool) -> None:
        """`touch` with the event time as epoch seconds (`epoch_seconds`): the pipeline
        converts each event's time once for `touch_at` and `due_at`."""
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

    def due(self, partition: int, event_ts: datetime) -> list[str]:
        """Advance the partition's clock to `event_ts`; return the sessions past their
        deadline (and forget them)."""
        return self.due_at(partition, epoch_seconds(event_ts))

    def due_at(self, partition: int, now: float) -> list[str]:
        """`due` with the event time as epoch seconds (`epoch_seconds`)."""
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
