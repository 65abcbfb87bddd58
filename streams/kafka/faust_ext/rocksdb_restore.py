"""The `rocksdb://` table's store, with its own apply of changelog records during recovery.

faust's RocksDB store applies a buffer of restored records as one `WriteBatch` per
partition, then writes each partition's persisted offset with a `put` of its own: two
writes through the write-ahead log per partition per buffer, the offset not atomic with
the records, and RocksDB's compactions running behind a store that is being rewritten
from scratch. `RestoringStore.apply_changelog_batch` writes, per partition per batch, one
`WriteBatch` with the batch's records (puts; deletes for tombstones: the same key and
value bytes, to the same partition's database, as faust's) and the partition's offset
under faust's `offset_key`, so a store never holds an offset ahead of its records nor
records past its offset that a restart would read again.

While an ACTIVE partition is being restored its writes skip the WAL and its database's
auto-compactions are off: the changelog is the log (a crash loses at most the records
since the last memtable flush, and the offset with them, which a restart restores again;
memtables flush whole, so a flushed store is a prefix of the batches). The unlogged
partitions are settled (memtables flushed to SST files, compactions back on) when
recovery completes, on a rebalance (before faust revokes or assigns), on stop, and before
any logged write to the partition: `set_persisted_offset` (normal processing notes the
changelog offsets the outputs delivered) and the table's writes (`_set`, `_del`); a
logged write after unlogged ones would survive a crash that lost them.

Settled at the end of recovery, a restored partition's database holds every restored record
in level-0 files (one per 4 MiB memtable, each spanning the whole key range): ~50 per
partition at 1M sessions over 4 partitions. With RocksDB's default triggers, turning
compactions on with that many stops its writes until they are compacted (from 36 files;
delayed from 20): the worker's first commit after such a restore blocked its event loop
for seconds while `/ready` said ready. So settling raises the database's triggers above
anything a restore leaves once `SERVING_LEVEL0_FILES` are reached (the worker's own
writes never pile up level-0 files: compactions start at 4), and recovery completes only
once the compactions have brought every restored partition under `SERVING_LEVEL0_FILES`
(a read checks each level-0 file; the event loop stays free meanwhile; `compacting` names
the partitions, `/ready` says so). Until the compactions are done, reads are slower.

STANDBY partitions go through the same apply with the WAL on (records and offset still in
one write; a standby is read for as long as the worker runs, so its writes are logged and
compactions stay on). So do active partitions once recovery has ended, and any write made
while the store stops.

`rocksdict` is imported inside the functions that write (the `worker` extra has no
rocksdict; only `rocksdb` does). Figures: docs/performance.md §4, "The restore's own
RocksDB apply".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from faust.stores.rocksdb import Store
from faust.types import TP

if TYPE_CHECKING:
    from rocksdict import Rdict, WriteOptions


log = logging.getLogger(__name__)

SERVING_LEVEL0_FILES = 64
"""A restored partition is processed once its database has fewer level-0 files (each
read checks every one: ~60 us a read with 50 of them, against ~11 us compacted)."""
SETTLED_TRIGGERS = {
    "level0_slowdown_writes_trigger": str(2 * SERVING_LEVEL0_FILES),
    "level0_stop_writes_trigger": str(4 * SERVING_LEVEL0_FILES),
}
"""A settled partition's write-stall triggers (RocksDB's defaults: 20 and 36)."""
COMPACTION_POLL_SECONDS = 0.05
"""How often the end of recovery looks at the restored partitions' level-0 files."""


class RestoringStore(Store):
    """faust's RocksDB store (rocksdict driver) with the restore's apply (see the module).
    With the python-rocksdb driver, faust's own apply runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unlogged: set[int] = set()
        """Partitions with writes not in the WAL nor flushed (auto-compactions off)."""
        self._without_wal: WriteOptions | None = None
        self.compacting: frozenset[int] = frozenset()
        """Restored partitions whose level-0 files the end of recovery waits for."""

    @property
    def unlogged_partitions(self) -> frozenset[int]:
        """Partitions whose latest writes are in memtables only (until `settle`)."""
        return frozenset(self._unlogged)

    def apply_changelog_batch(
        self,
        batch: Iterable[Any],
        to_key: Callable[[Any], Any],
        to_value: Callable[[Any], Any],
    ) -> None:
        if not self.use_rocksdict:
            super().apply_changelog_batch(batch, to_key, to_value)
            return
        self.write_changelog_records(batch, unlogged=self._restoring_actives())

    def write_changelog_records(self, batch: Iterable[Any], *, unlogged: Collection[TP]) -> None:
        """Write `batch` (changelog events or `ChangelogRecord`s, in offset order per
        partition): one write per partition holding its records and its persisted offset
        (the batch's highest), without the WAL for the partitions in `unlogged`."""
        from rocksdict import WriteBatch  # noqa: PLC0415  (the `rocksdb` extra)

        offset_key = self.offset_key
        writes: dict[int, WriteBatch] = {}
        offsets: dict[TP, int] = {}
        for event in batch:
            message = event.message
            partition = message.partition
            write = writes.get(partition)
            if write is None:
                write = writes[partition] = WriteBatch(raw_mode=True)
            value = message.value
            if value is None:
                write.delete(message.key)
            else:
                write.put(message.key, value)
            tp, offset = message.tp, message.offset
            seen = offsets.get(tp)
            if seen is None or offset > seen:
                offsets[tp] = offset
        for tp, offset in offsets.items():  # (each tp's partition has its write above)
            writes[tp.partition].put(offset_key, str(offset).encode())
        without_wal = {tp.partition for tp in offsets if tp in unlogged}
        for partition, write in writes.items():
            db = self._db_for_partition(partition)
            if partition in without_wal:
                self._start_unlogged(partition, db)
                db.write(write, self._write_options_without_wal())
            else:
                if partition in self._unlogged:
                    self.settle(partition)
                db.write(write)

    def stored_in(self, partition: int, key: bytes) -> bytes | None:
        """`key`'s value in `partition`'s database: what faust's `_get` reads while an
        event of `partition` is current, without its look-ups of that event."""
        value: bytes | None = self._db_for_partition(partition).get(key)
        return value

    def write_in(self, partition: int, writes: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Put (value None: delete) each of `writes` in `partition`'s database, in one
        logged `WriteBatch` (unlogged writes settled first, as `_set` does)."""
        from rocksdict import WriteBatch  # noqa: PLC0415  (the `rocksdb` extra)

        if self._unlogged:
            self.settle()
        write = WriteBatch(raw_mode=True)
        for key, value in writes:
            if value is None:
                write.delete(key)
            else:
                write.put(key, value)
        self._db_for_partition(partition).write(write)

    def settle(self, partition: int | None = None) -> list[int]:
        """Flush the unlogged writes of `partition` (None: of every partition) to SST files
        and turn its database's auto-compactions back on. Returns the partitions settled."""
        settled = []
        for p in sorted(self._unlogged) if partition is None else [partition]:
            if p not in self._unlogged:
                continue
            db = self._dbs.get(p)
            if db is not None:
                db.flush(True)
                db.set_options({**SETTLED_TRIGGERS, "disable_auto_compactions": "false"})
                settled.append(p)
            self._unlogged.discard(p)
        return settled

    async def until_compacted(self, partitions: Collection[int]) -> None:
        """Return once each of `partitions` has fewer than `SERVING_LEVEL0_FILES` level-0
        files (RocksDB compacts them in its own threads; the event loop stays free)."""
        waiting = self._uncompacted(partitions)
        if waiting:
            log.info("compacting the restored partitions %s before processing", waiting)
        try:
            while waiting:
                self.compacting = frozenset(waiting)
                await asyncio.sleep(COMPACTION_POLL_SECONDS)
                waiting = self._uncompacted(waiting)
        finally:
            self.compacting = frozenset()

    def _uncompacted(self, partitions: Iterable[int]) -> list[int]:
        """Those of `partitions` with `SERVING_LEVEL0_FILES` level-0 files or more (a
        partition revoked meanwhile has no database here: none)."""
        return [
            p
            for p in partitions
            if (db := self._dbs.get(p)) is not None
            and (db.property_int_value("rocksdb.num-files-at-level0") or 0) >= SERVING_LEVEL0_FILES
        ]

    def set_persisted_offset(self, tp: TP, offset: int) -> None:
        if tp.partition in self._unlogged:
            self.settle(tp.partition)
        super().set_persisted_offset(tp, offset)

    def _set(self, key: bytes, value: bytes | None) -> None:
        if self._unlogged:  # (empty once recovery has completed)
            self.settle()
        super()._set(key, value)

    def _del(self, key: bytes) -> None:
        if self._unlogged:
            self.settle()
        super()._del(key)

    async def on_rebalance(
        self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP], generation_id: int = 0
    ) -> None:
        self.settle()  # before faust lets go of revoked partitions' databases
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)

    async def on_recovery_completed(self, active_tps: set[TP], standby_tps: set[TP]) -> None:
        await self.until_compacted(self.settle())
        await super().on_recovery_completed(active_tps, standby_tps)

    async def stop(self) -> None:
        self.settle()
        await super().stop()

    def _restoring_actives(self) -> Collection[TP]:
        """The active partitions under recovery (none while the store stops)."""
        tables: Any = self.app.tables  # (faust's TableManagerT does not declare `recovery`)
        recovery = tables.recovery
        if not recovery.in_recovery or self.should_stop:
            return ()
        actives: Collection[TP] = recovery.active_tps
        return actives

    def _start_unlogged(self, partition: int, db: Rdict) -> None:
        if partition not in self._unlogged:
            db.set_options({"disable_auto_compactions": "true"})
            self._unlogged.add(partition)

    def _write_options_without_wal(self) -> WriteOptions:
        options = self._without_wal
        if options is None:
            from rocksdict import WriteOptions  # noqa: PLC0415  (the `rocksdb` extra)

            options = WriteOptions()
            # rocksdict's stub declares a method; at runtime it is a property (0.3.29)
            options.disable_wal = True  # type: ignore[method-assign,assignment]
            self._without_wal = options
        return options
