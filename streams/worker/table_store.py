"""`TableSessionStore`: session records in the faust `sessions` table, the worker's
`SessionStore` (`streams.worker.store`), with its deferred writes (docs/architecture.md)."""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Callable, MutableMapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from typing import Protocol, TypeGuard

from loopwatch.streams.worker.record import SessionRecord, Unconfirmed
from loopwatch.streams.worker.store import VerdictDeliveries

MAX_DECODED_RECORDS = 4096
"""Decoded table values kept by default (`LOOPWATCH_SESSION_CACHE`); beyond them the least
recently used is decoded again."""
MAX_PENDING_WRITES = 4096
"""Sessions noted for the next write (deferred writes); at this many they are written at
once, without waiting for the commit."""
WRITES_PER_TURN = 32
"""Noted records `write_pending_in_turns` encodes and writes per event-loop turn, so that
a commit's writes never hold the loop for long (docs/performance.md, "Hot-path choices")."""


class PartitionedTable(Protocol):
    """What `TableSessionStore` needs of the faust table for deferred writes
    (`streams.kafka.faust_ext.session_table.SessionTable`)."""

    def current_partition(self) -> int:
        """The partition of the event being processed."""

    def writing_in(self, partition: int) -> AbstractContextManager[None]:
        """Table reads and writes inside go to `partition`."""

    def stored(self, key: bytes) -> bytes | None:
        """`get(key)`, by the table's quickest read (an event of the key's partition is
        current)."""

    def write_all(self, partition: int, writes: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Set each key of `writes` in `partition` (None: delete it if present)."""


_ABSENT = object()


class TableSessionStore:
    """Session records in the faust `sessions` table (key: session id as UTF-8, value:
    `SessionRecord.encode()`). Writes must happen while an event of the key's partition
    is current, as faust requires.

    `deferred` (the worker, at least once): `set` and `delete` only note the session's
    newest record (or its deletion) with its partition; `write_pending()` writes each
    noted session once, and the worker calls it before every offset commit, ahead of the
    outputs' flush. So a session gets one table write (one changelog record, one encode)
    per commit instead of one per event, and the offset of an event is still committed
    only after its session's record is acknowledged. A crash before the write loses only
    events whose offsets were not committed; they are processed again. `get` sees the
    noted records first. The table must then be a `PartitionedTable`.
    """

    def __init__(
        self,
        table: MutableMapping[bytes, bytes],
        *,
        deferred: bool = False,
        max_pending: int = MAX_PENDING_WRITES,
        max_decoded: int = MAX_DECODED_RECORDS,
    ) -> None:
        self._table = table
        self._partitioned = table if _is_partitioned(table) else None
        self._stored: Callable[[bytes], bytes | None] = (
            table.get if self._partitioned is None else self._partitioned.stored
        )
        self.deliveries = VerdictDeliveries()
        # The decoded form of the values this worker wrote last (LRU, at most
        # `max_decoded`; 0: none): the next event of a session skips the table read and
        # the record's decode. Only this store writes the table of the partitions it
        # processes; a rebalance (`forget_partitions`), after which a partition's table
        # may hold another worker's writes, empties it.
        self._decoded: OrderedDict[bytes, SessionRecord] = OrderedDict()
        self._max_decoded = max_decoded
        self._deferred = deferred
        self._max_pending = max_pending
        # key -> (partition, newest record; None: delete), in the order first noted
        self._pending: dict[bytes, tuple[int, SessionRecord | None]] = {}
        # Taken for writing, not written yet (`write_pending_in_turns` between turns):
        # still what `get` returns unless a newer record is noted.
        self._writing: dict[bytes, tuple[int, SessionRecord | None]] = {}

    @property
    def deferred(self) -> bool:
        return self._deferred

    @property
    def pending(self) -> int:
        """Sessions whose newest record is noted but not written to the table yet."""
        return len(self._pending.keys() | self._writing.keys())

    def get(self, session_id: str) -> SessionRecord | None:
        key = session_id.encode()
        noted = self._pending.get(key, _ABSENT)
        if noted is _ABSENT:
            noted = self._writing.get(key, _ABSENT)
        if noted is not _ABSENT:
            assert isinstance(noted, tuple)
            record: SessionRecord | None = noted[1]
            return record
        cached = self._decoded.get(key)
        if cached is not None:
            return cached
        stored = self._stored(key)
        return None if stored is None else SessionRecord.decode(stored)

    def set(self, session_id: str, record: SessionRecord) -> None:
        key = session_id.encode()
        if self._deferred:
            self._note(key, record)
            return
        # Stored as the deferred write stores it: without the acknowledged verdicts that
        # the pipeline carries behind one in flight (`processing._carried`).
        self._write(key, record)

    def delete(self, session_id: str) -> None:
        key = session_id.encode()
        self._decoded.pop(key, None)
        if self._deferred:
            self._note(key, None)
            return
        if key in self._table:
            del self._table[key]

    def is_unconfirmed(self, session_id: str, seq: int) -> bool:
        return self.deliveries.is_unconfirmed(session_id, seq)

    def sent_here(self, session_id: str, seq: int) -> bool:
        return self.deliveries.sent_here(session_id, seq)

    def write_back(self, session_id: str) -> None:
        """Write the session's stored value back, unchanged. A RocksDB store can hold a
        write whose changelog record a stopped worker never sent (records go out in
        batches); writing it again puts it in the changelog, so a later owner of the
        partition does not get an older state. (A noted record is written anyway.)"""
        key = session_id.encode()
        if key in self._pending or key in self._writing:
            return
        stored = self._table.get(key)
        if stored is not None:
            self._table[key] = stored

    def write_pending(self) -> None:
        """Write every noted record (or deletion) to the table, grouped by partition; the
        changelog records go to the outputs, which the caller flushes next."""
        self._take_pending()
        self._write_taken(len(self._writing))

    async def write_pending_in_turns(self, per_turn: int = WRITES_PER_TURN) -> None:
        """`write_pending`, `per_turn` records per event-loop turn: between turns events
        are processed and their verdicts sent. Records noted meanwhile belong to later
        events and wait for the next call (a newer record of a session being written
        replaces it: the newest state is written either way)."""
        self._take_pending()
        while self._writing:
            self._write_taken(per_turn)
            if self._writing:
                await asyncio.sleep(0)  # one loop turn for the events waiting

    def _take_pending(self) -> None:
        for key, noted in self._pending.items():
            self._writing.pop(key, None)  # the newer record goes in the older's place
            self._writing[key] = noted
        self._pending = {}

    def _write_taken(self, count: int) -> None:
        """Write the first `count` taken records, grouped by partition."""
        by_partition: dict[int, list[tuple[bytes, SessionRecord | None]]] = {}
        writing = self._writing
        for key in list(itertools.islice(writing, count)):
            partition, record = writing.pop(key)
            by_partition.setdefault(partition, []).append((key, record))
        table = self._partitioned
        assert table is not None, "deferred writes need a PartitionedTable"
        for partition, writes in by_partition.items():
            stored = [
                (key, None if r is None else self._unconfirmed_only(key, r)) for key, r in writes
            ]
            table.write_all(
                partition, [(key, None if r is None else r.encode()) for key, r in stored]
            )
            for key, record in stored:
                if record is not None:
                    self._remember(key, record)

    def _unconfirmed_only(self, key: bytes, record: SessionRecord) -> SessionRecord:
        """`record` without the verdicts and episodes acknowledged since it was noted
        (most of them by the commit that writes it): they are stored in their topics, so
        a replay need not send them again, and the record's value shrinks by their JSON.
        (The next event of the session drops them too, but only from the front:
        `processing._carried`.)"""
        if not record.unconfirmed and not record.unconfirmed_episodes:
            return record
        session_id = key.decode()
        verdicts = self._in_flight(record.unconfirmed, session_id)
        episodes = self._in_flight(record.unconfirmed_episodes, session_id)
        if verdicts == record.unconfirmed and episodes == record.unconfirmed_episodes:
            return record  # all still in flight
        return SessionRecord(
            record.state,
            record.last_seq,
            record.last_ts,
            verdicts,
            episodes,
            record.seen,
            record.seen_wall,
        )

    def _in_flight(self, items: Unconfirmed, session_id: str) -> Unconfirmed:
        """Those of `items` whose event's records are not all acknowledged yet."""
        unconfirmed = self.deliveries.is_unconfirmed
        return tuple([item for item in items if unconfirmed(session_id, item[0])])

    def forget_partitions(self, partitions: AbstractSet[int]) -> None:
        """Partitions revoked: drop what was noted for them (their events' offsets were
        not committed, so their next owner processes them again)."""
        if not partitions:
            return
        # the decoded records do not say their partition: all go, read again when needed
        self._decoded.clear()
        self._pending = {k: v for k, v in self._pending.items() if v[0] not in partitions}
        self._writing = {k: v for k, v in self._writing.items() if v[0] not in partitions}

    def _note(self, key: bytes, record: SessionRecord | None) -> None:
        table = self._partitioned
        assert table is not None, "deferred writes need a PartitionedTable"
        self._pending[key] = (table.current_partition(), record)
        if len(self._pending) >= self._max_pending:
            self.write_pending()  # bounded memory; a commit writes the rest

    def _write(self, key: bytes, record: SessionRecord) -> None:
        stored = self._unconfirmed_only(key, record)
        self._table[key] = stored.encode()
        self._remember(key, stored)

    def _remember(self, key: bytes, stored: SessionRecord) -> None:
        """`stored`, just written for `key`, is what the session's next `get` returns
        (noted once written: a write that raised leaves the table's older value)."""
        if self._max_decoded:
            decoded = self._decoded
            decoded[key] = stored
            decoded.move_to_end(key)
            if len(decoded) > self._max_decoded:
                decoded.popitem(last=False)


def _is_partitioned(table: object) -> TypeGuard[PartitionedTable]:
    return all(
        hasattr(table, name) for name in ("writing_in", "current_partition", "stored", "write_all")
    )
