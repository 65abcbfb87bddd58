"""Which sessions to delete: idle ones after the TTL, ended ones after a short retention
(kept so replayed events of an ended session stay duplicates). docs/contract.md §8.5.

So that a session receiving events is never deleted by them:

* A session's own idleness is measured in its own event time by the pipeline (an event
  more than the TTL after the session's previous one resets its state, `state_reset`),
  the same rule `loopwatch scan` applies offline (`idle_past`).
* The sweep that deletes sessions which never come back waits for the TTL on two clocks:
  the partition's *log clock*, the newest Kafka record timestamp it has shown, never
  ahead of the worker's clock and never back (`advance`), and the worker's own clock. A
  session's deadlines count from both when its last record was read, never from its
  event `ts`: an old-stamped session that is receiving events is as fresh as any other,
  a far-future `ts` moves nothing, a backlog read after an outage keeps the log's gaps
  (the worker's clock alone would sweep it all at once), and a jump of the log clock (a
  producer whose clock lags, then one whose clock is right) sweeps nothing that the
  worker read moments ago.

Sweeping happens while processing a record of that partition, which is where faust lets
the agent write the table (the deleted key lives in the same partition). A sweep takes
at most `limit` sessions at a time: when more are due (a mass expiry: a fleet that went
quiet, or a partition's first record in hours), the partition is *carried over* and the
worker deletes the rest a step per event-loop turn (`due_again`), so that one record never
pays for a whole partition's expiry while other events wait for their verdicts.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
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


def idle_past(last_ts: datetime, ts: datetime, idle_ttl: timedelta) -> bool:
    """The per-session rule (docs/contract.md §8.5): an event stamped more than the TTL
    after its session's previous event finds that session's state expired. Only the
    session's own timestamps count, so live and `loopwatch scan` agree; an event stamped
    before the previous one is never a gap. (A datetime difference: several times
    cheaper than two `epoch_seconds` for the shared zone objects events decode with.)"""
    return ts - last_ts > idle_ttl


Deadline = tuple[float, float, str]
"""(on the log clock, on the worker's clock, the session): a session goes once both have
passed. One tuple per touch, held by the partition's dict and its heap alike (a stale
heap entry is one the dict no longer holds: `is`, not `==`), with the session id the
dict already keys by: an open session costs one dict slot, one tuple and two floats,
and a touch left stale in the heap one tuple and two floats (docs/performance.md §4)."""

_NEVER = float("inf")

Touch = tuple[str, float, bool, float | None]
"""(session, last seen on the log clock, ended, last seen on the worker's clock or None):
`ExpiryIndex.touch_at`'s arguments."""


@dataclass
class _PartitionIndex:
    deadlines: dict[str, Deadline] = field(default_factory=dict)
    heap: list[Deadline] = field(default_factory=list)
    """The `deadlines` entries by log deadline, with stale entries skipped lazily;
    rebuilt when it grows."""
    waiting: list[tuple[float, Deadline]] = field(default_factory=list)
    """(wall deadline, entry) of sessions past their log deadline whose wall deadline has
    not passed yet (ordered as (wall, log, session) would be)."""
    clock: float = float("-inf")
    wall: float = float("-inf")
    """The worker's clock at the partition's latest sweep (what `due_again` goes on with)."""
    peak: int = 0
    """The most sessions `deadlines` has held since it was last compacted: a dict never
    shrinks as keys are deleted, so after a mass expiry it is copied (`_take_due`)."""


_WORK_PER_DUE = 8
"""Entries a limited sweep may pop from each of its two heaps per session it may delete:
stale entries (sessions touched again or forgotten) are cheap to pass over, not free."""
COMPACT_AT = 256
"""A partition's deadlines dict is copied once it holds under a quarter of its peak (and
the peak was at least this): the copy is sized for the sessions left."""


class ExpiryIndex:
    """Deadlines of the sessions of each partition this worker holds."""

    def __init__(self, idle_ttl: timedelta, ended_retention: timedelta) -> None:
        self.idle_ttl = idle_ttl
        """The idle TTL (the pipeline's per-session rule, `idle_past`, uses it too)."""
        self._idle_ttl = idle_ttl.total_seconds()
        self._ended_retention = ended_retention.total_seconds()
        self._partitions: dict[int, _PartitionIndex] = {}
        self._carried: set[int] = set()

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
        """`touch_at` with a datetime (and no wall-clock condition)."""
        self.touch_at(partition, session_id, epoch_seconds(seen), ended=ended)

    def touch_at(
        self,
        partition: int,
        session_id: str,
        last: float,
        *,
        ended: bool,
        wall: float | None = None,
    ) -> None:
        """Record when a session was last seen: `last` on the partition's log clock
        (epoch seconds: the clock `advance` returned, or a stored record's `seen` read
        back from the changelog) and `wall` on the worker's clock (None: no condition on
        it). The partition has seen that time, so its clock moves there too: a worker that
        rebuilds the index after a crash starts from the clock the crashed one had (as far
        as the records read back tell)."""
        self.touch_all(partition, ((session_id, last, ended, wall),))

    def touch_all(self, partition: int, touches: Iterable[Touch]) -> None:
        """`touch_at` for each of `touches` in turn, in one call: the same index, without
        a call per touch (a recovery's batch of changelog records)."""
        index = self._partitions.get(partition)
        if index is None:  # (not setdefault: it would build an index on every call)
            index = self._partitions[partition] = _PartitionIndex()
        deadlines, heap = index.deadlines, index.heap
        clock, idle_ttl, ended_retention = index.clock, self._idle_ttl, self._ended_retention
        push, get = heapq.heappush, deadlines.get
        for touched, last, ended, wall in touches:
            clock = max(clock, last)
            span = ended_retention if ended else idle_ttl
            previous = get(touched)
            # the id object the dict keeps, not the event's copy
            session_id = touched if previous is None else previous[2]
            entry = deadlines[session_id] = (
                last + span,
                -_NEVER if wall is None else wall + span,
                session_id,
            )
            push(heap, entry)
            if len(heap) > 2 * len(deadlines) + 1024:
                heap = index.heap = list(deadlines.values())
                heapq.heapify(heap)
                index.waiting = []  # (what it held is back in the heap)
        index.clock = clock
        # (touches only add sessions: the dict is largest now)
        index.peak = max(index.peak, len(deadlines))

    def forget(self, partition: int, session_id: str) -> None:
        index = self._partitions.get(partition)
        if index is not None:
            index.deadlines.pop(session_id, None)

    def drop_partition(self, partition: int) -> None:
        """The partition went to another worker."""
        self._partitions.pop(partition, None)
        self._carried.discard(partition)

    def carried_over(self) -> set[int]:
        """Partitions where a limited sweep left sessions due (`due_again` takes them)."""
        return self._carried

    def stop_carrying(self, partition: int) -> None:
        """Leave the partition's due sessions to the sweep of its next record."""
        self._carried.discard(partition)

    def sessions(self) -> int:
        return sum(len(index.deadlines) for index in self._partitions.values())

    def due(self, partition: int, clock: datetime) -> list[str]:
        """`due_at` with a datetime."""
        return self.due_at(partition, epoch_seconds(clock))

    def due_at(
        self, partition: int, now: float, wall: float = _NEVER, limit: int | None = None
    ) -> list[str]:
        """Advance the partition's clock to `now` (epoch seconds, normally what `advance`
        returned); return the sessions past both their deadlines, on the log clock and,
        at `wall` (the worker's clock), on the worker's (and forget them). At most `limit`
        of them (None: all): the partition is then carried over (`carried_over`)."""
        index = self._partitions.get(partition)
        if index is None:
            return []
        index.clock = max(index.clock, now)
        index.wall = max(index.wall, wall)
        return self._take_due(partition, index, limit)

    def due_again(self, partition: int, limit: int) -> list[str]:
        """At most `limit` more sessions of a carried-over partition, due on the clocks of
        its latest sweep (the worker's clock has not moved them: a session that was not
        due then waits, as before, for a record of its partition)."""
        index = self._partitions.get(partition)
        if index is None:
            self._carried.discard(partition)
            return []
        return self._take_due(partition, index, limit)

    def _take_due(self, partition: int, index: _PartitionIndex, limit: int | None) -> list[str]:
        deadlines = index.deadlines
        heap, waiting = index.heap, index.waiting
        clock, wall = index.clock, index.wall
        work = _NEVER if limit is None else _WORK_PER_DUE * limit
        most = _NEVER if limit is None else limit
        while heap and heap[0][0] < clock and work > 0:
            work -= 1
            entry = heapq.heappop(heap)
            if deadlines.get(entry[2]) is entry:
                heapq.heappush(waiting, (entry[1], entry))
        expired: list[str] = []
        work = _NEVER if limit is None else _WORK_PER_DUE * limit
        while waiting and waiting[0][0] < wall and len(expired) < most and work > 0:
            work -= 1
            entry = heapq.heappop(waiting)[1]
            session_id = entry[2]
            if deadlines.get(session_id) is entry:
                del deadlines[session_id]
                expired.append(session_id)
        if (heap and heap[0][0] < clock) or (waiting and waiting[0][0] < wall):
            self._carried.add(partition)  # (without a limit: nothing left to carry)
        else:
            self._carried.discard(partition)
        if expired and index.peak >= COMPACT_AT and len(deadlines) < index.peak // 4:
            index.deadlines = dict(deadlines)
            index.peak = len(deadlines)
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
    read = _read_changelog(message, decode)
    if read is _UNREADABLE:
        return
    session_id, stored = read
    if stored is None:
        index.forget(message.partition, session_id)
    else:
        touch(message.partition, session_id, stored)


def index_changelog_records(
    index: ExpiryIndex,
    messages: Iterable[Any],
    times: Callable[[bytes], tuple[float, bool, float | None]],
) -> None:
    """`index_changelog_record` for each of `messages` in turn, where a stored value's
    `times` are `touch_at`'s (last seen, ended, wall): the touches of each run of one
    partition's stored records go to the index in one `touch_all`."""
    touches: list[Touch] = []
    partition = -1
    for message in messages:
        if message.partition != partition and touches:
            index.touch_all(partition, touches)
            touches = []
        partition = message.partition
        read = _read_changelog(message, times)
        if read is _UNREADABLE:
            continue
        session_id, stored = read
        if stored is None:
            if touches:
                index.touch_all(partition, touches)
                touches = []
            index.forget(partition, session_id)
        else:
            touches.append((session_id, *stored))
    if touches:
        index.touch_all(partition, touches)


_UNREADABLE: Any = object()


def _read_changelog(message: Any, decode: Callable[[bytes], Stored]) -> tuple[str, Stored | None]:
    """(session id, its decoded value; None for a tombstone), or `_UNREADABLE` for a
    value that does not decode."""
    session_id = message.key.decode() if message.key else ""
    if message.value is None:
        return session_id, None
    try:
        return session_id, decode(message.value)
    except (ValueError, KeyError, TypeError):
        return _UNREADABLE  # type: ignore[no-any-return]
