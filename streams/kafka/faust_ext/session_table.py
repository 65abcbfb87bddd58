"""The `sessions` table class: faust's Table, its changelog records sent through `Outputs`.

faust's own `on_key_set` sends each changelog record through `Topic.send_soon` (see
`streams.kafka.outputs` for what that costs). This subclass hands them to the worker's batched
outputs instead, to the same changelog partition (the current event's, as faust does).
What it leaves out of faust's version: key TTLs (windowed tables only) and the faust
monitor's table counters (loopwatch's metrics are its own). Without outputs set (under
exactly_once) it writes its changelog as faust's Table does.

With a store that keeps its records (RocksDB), recovery reads the changelog only from the
offset the store already holds, so `on_changelog_event` sees none of the older records:
once recovery is done, the table passes the records it kept for each newly assigned
partition through `on_changelog_event` too, as if they had been read from the changelog
(the worker rebuilds its index of session deadlines from these calls).

`writing_in(partition)` lets the worker write the table outside of its agent (the
session store writes each session's newest record once per offset commit, from the
commit; `streams.worker.store`): faust's table and its RocksDB store take the partition
of a write from the current event, so a stand-in event of that partition is made current
for the writes.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import faust
from faust.streams import _current_event
from faust.types import TP
from faust.types.stores import StoreT
from faust.types.tuples import Message
from yarl import URL

if TYPE_CHECKING:
    from loopwatch.streams.kafka.faust_ext.rocksdb_restore import RestoringStore

Write = tuple[bytes, bytes | None]
"""A key and its new value (None: delete it)."""

STORED_RECORDS_PER_YIELD = 1000
"""Stored records passed to `on_changelog_event` between two yields to the event loop."""


class ChangelogOutputs(Protocol):
    """The part of `streams.kafka.outputs.Outputs` the table uses (no import upwards)."""

    def add_changelog(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        """Produce a table changelog record (value None: a tombstone) to `partition`."""


class SessionTable(faust.Table[bytes, bytes]):
    outputs: ChangelogOutputs | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Changelog partitions assigned with records in the local store that recovery
        # will not read again (their persisted offset is past them).
        self._stored_unannounced: set[int] = set()
        self._stand_ins: dict[int, tuple[_StandInEvent, weakref.ref[_StandInEvent]]] = {}
        self._restoring: RestoringStore | None = None
        """The store, when `_new_store_by_url` made a `RestoringStore` (`rocksdb://`)."""

    async def on_rebalance(
        self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP], generation_id: int = 0
    ) -> None:
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)
        topics = self.changelog_topic.topics
        for tp in revoked:
            if tp.topic in topics:
                self._stored_unannounced.discard(tp.partition)
        for tp in newly_assigned:
            # A persisted offset means the store kept the records up to it (RocksDB);
            # the memory store has none.
            if tp.topic in topics and self.data.persisted_offset(tp) is not None:
                self._stored_unannounced.add(tp.partition)

    async def on_recovery_completed(self, active_tps: set[TP], standby_tps: set[TP]) -> None:
        await super().on_recovery_completed(active_tps, standby_tps)
        for tp in sorted(active_tps):
            if tp.partition in self._stored_unannounced:
                self._stored_unannounced.discard(tp.partition)
                await self._announce_stored(tp)

    async def on_changelog_events(self, events: list[Any]) -> None:
        """Changelog records read by recovery, several at once (`BatchRecovery`): to the
        hook's batch call if it has one, else one by one as faust does."""
        hook = self._on_changelog_event
        if isinstance(hook, ChangelogHook):
            hook.records([event.message for event in events])
            return
        for event in events:
            await self.on_changelog_event(event)

    async def _announce_stored(self, tp: TP) -> None:
        """Every record the store holds for `tp`, as if read from its changelog: to the
        hook's batch call as `StoredRecord`s, else as faust's events one by one."""
        store: Any = self.data  # faust.stores.rocksdb.Store (pinned faust: private API)
        db = store._db_for_partition(tp.partition)
        items: list[tuple[bytes, bytes]] = []
        for item in store._visible_items(db):
            items.append(item)
            if len(items) == STORED_RECORDS_PER_YIELD:
                await self._announce(tp, items)
                items = []
                await asyncio.sleep(0)  # a large store: let heartbeats through
                if tp not in self.app.assignor.assigned_actives():
                    return  # revoked meanwhile
        await self._announce(tp, items)

    async def _announce(self, tp: TP, items: list[tuple[bytes, bytes]]) -> None:
        hook = self._on_changelog_event
        if isinstance(hook, ChangelogHook):
            # No faust Message and Event per record: they were ~7 of the ~11 us a record
            # cost, 12 s of a restart holding 1M sessions (docs/performance.md §4).
            partition = tp.partition
            hook.records([StoredRecord(partition, key, value) for key, value in items])
            return
        for key, value in items:
            message = Message(tp.topic, tp.partition, -1, 0.0, 0, [], key, value, None, tp=tp)
            await self.on_changelog_event(self.app.create_event(key, value, [], message))

    def _new_store_by_url(self, url: str | URL) -> StoreT[bytes, bytes]:
        """faust's store for `url`; for `rocksdb://`, `rocksdb_restore.RestoringStore` (the
        restore's own apply of changelog records). Other stores are faust's, unchanged."""
        if URL(url).scheme != "rocksdb":
            return super()._new_store_by_url(url)
        # lazy: faust's RocksDB store module loads rocksdict when installed, which the
        # memory store does without
        from loopwatch.streams.kafka.faust_ext.rocksdb_restore import (  # noqa: PLC0415
            RestoringStore,
        )

        store = self._restoring = RestoringStore(
            url,
            self.app,
            self,
            table_name=self.name,
            key_type=self.key_type,
            key_serializer=self.key_serializer,
            value_serializer=self.value_serializer,
            value_type=self.value_type,
            loop=self.loop,
            options=self.options,
        )
        return store

    def _new_changelog_topic(self, **kwargs: Any) -> Any:
        topic: Any = super()._new_changelog_topic(**kwargs)
        conf = self.app.conf
        if (conf.key_serializer, conf.value_serializer) != ("raw", "raw"):
            return topic  # (values that faust's schema decodes)
        return RawChangelogTopic(**{**topic._clone_args(), "root": None})

    def writing_in(self, partition: int) -> _WritingIn:
        """Table reads and writes in this block go to `partition` (its changelog partition
        and, with RocksDB, its store), as if an event of that partition were current.
        Entered once per event: one stand-in event per partition, made once."""
        reference = self._stand_ins.get(partition)
        if reference is None:
            # Its topic is the changelog's: faust checks the partition count of a current
            # event's topic against the changelog's, which this passes trivially.
            message = Message(self._changelog_name(), partition, -1, 0.0, 0, [], None, None, None)
            stand_in = _StandInEvent(message)
            # the dict keeps the stand-in alive for faust's weak reference to it
            reference = self._stand_ins[partition] = (stand_in, weakref.ref(stand_in))
        return _WritingIn(reference[1])

    def stored(self, key: bytes) -> bytes | None:
        """`self.get(key)` (an event of the key's partition is current), read straight
        from that partition's RocksDB database when the store allows (`write_all`)."""
        store = self._direct_store()
        if store is None:
            value: bytes | None = self.get(key)
            return value
        return store.stored_in(self.current_partition(), key)

    def write_all(self, partition: int, writes: Sequence[Write]) -> None:
        """Set each key of `writes` in `partition` (value None: delete it if present),
        each with its changelog record, as `self[key] = value` and `del self[key]` under
        `writing_in(partition)` do. With the rocksdict store and the outputs set, the
        writes go to the partition's database as one `WriteBatch` and their changelog
        records to the outputs, without faust's per-key layers (~11 us a write:
        docs/performance.md §4, "The cold path")."""
        store = self._direct_store()
        outputs = self.outputs
        if store is None or outputs is None:
            with self.writing_in(partition):
                write_each(self, writes)
            return
        held: dict[bytes, bool] = {}  # written earlier in `writes` (a later delete sees it)
        kept: list[Write] = []
        for key, value in writes:
            if value is None:
                present = held.get(key)
                if present is None:
                    present = store.stored_in(partition, key) is not None
                if not present:
                    continue  # (faust's path deletes, and logs, only a key it holds)
            held[key] = value is not None
            kept.append((key, value))
        if not kept:
            return
        store.write_in(partition, kept)
        changelog = self._changelog_name()
        for key, value in kept:
            outputs.add_changelog(changelog, partition, key, value)

    def _direct_store(self) -> RestoringStore | None:
        """The table's store when `stored` and `write_all` may use it directly: the
        `RestoringStore` `_new_store_by_url` made, with the rocksdict driver."""
        store = self._restoring
        return store if store is not None and store.use_rocksdict else None

    def current_partition(self) -> int:
        """The partition of the current event (the agent's): where a write goes now."""
        return self._partition(None)

    def on_key_set(self, key: Any, value: Any) -> None:
        if self.outputs is None:
            super().on_key_set(key, value)
            return
        self.outputs.add_changelog(self._changelog_name(), self._partition(key), key, value)

    def on_key_del(self, key: Any) -> None:
        if self.outputs is None:
            super().on_key_del(key)
            return
        self.outputs.add_changelog(self._changelog_name(), self._partition(key), key, None)

    def on_changelog_delivered(self, topic: str, partition: int, offset: int) -> None:
        """A batch of changelog records was acknowledged: note the offset with the store
        (RocksDB keeps it to resume recovery there; the memory store ignores it)."""
        if topic == self._changelog_name():
            self.data.set_persisted_offset(TP(topic, partition), offset)

    def _changelog_name(self) -> str:
        name: str = self.changelog_topic.get_topic_name()
        return name

    def _partition(self, key: Any) -> int:
        partition = self.partition_for_key(key)  # the current event's partition
        if partition is None:
            raise RuntimeError("the sessions table is written outside of its agent")
        return int(partition)


def write_each(table: MutableMapping[bytes, bytes], writes: Iterable[Write]) -> None:
    """Each of `writes` as a mapping write: set the key, or (value None) delete it if the
    table holds it (faust's table logs a deletion only then)."""
    for key, value in writes:
        if value is not None:
            table[key] = value
        elif key in table:
            del table[key]


class RawChangelogTopic(faust.Topic):
    """The table's changelog topic, whose records recovery reads as they are: the table
    holds raw bytes (the app's serializers are "raw"), so faust's schema decode per
    record (two codec look-ups that return the bytes they are given) is left out."""

    def _compile_decode(self) -> None:
        create_event = self.app.create_event

        async def decode(message: Message, *, propagate: bool = False) -> Any:
            return create_event(message.key, message.value, message.headers, message)

        self.decode = decode  # type: ignore[method-assign]


class _WritingIn:
    """`SessionTable.writing_in`'s context: faust's current event set to a stand-in."""

    __slots__ = ("_reference", "_token")

    def __init__(self, reference: weakref.ref[_StandInEvent]) -> None:
        self._reference = reference

    def __enter__(self) -> None:
        self._token = _current_event.set(self._reference)  # type: ignore[arg-type]

    def __exit__(self, *_: object) -> None:
        _current_event.reset(self._token)


class _StandInEvent:
    """What faust's table and stores read of the current event: its message (topic,
    partition). faust's context variable refers to it weakly, as to real events."""

    __slots__ = ("__weakref__", "message")

    def __init__(self, message: Message) -> None:
        self.message = message


class StoredRecord(NamedTuple):
    """A record the local store holds, handed to `ChangelogHook.records` as a changelog
    record read by recovery would be: what the hook's targets read of one."""

    partition: int
    key: bytes
    value: bytes


class ChangelogHook:
    """The table's `on_changelog_event`, given to faust before its target exists (the
    table is built before the handler that indexes its records, which needs the table).
    `target` takes changelog records several at once: faust's messages of those recovery
    read, `StoredRecord`s of those the local store held; it reads their `partition`,
    `key` and `value` only."""

    def __init__(self) -> None:
        self.target: Callable[[list[Any]], None] | None = None

    async def __call__(self, event: Any) -> None:
        self.records([event.message])

    def records(self, messages: list[Any]) -> None:
        if self.target is None:
            raise RuntimeError("a changelog record arrived before its handler was set")
        self.target(messages)


ROCKSDB_WRITE_BUFFER_BYTES = 4 * 1024 * 1024
"""One memtable of a partition's RocksDB database (faust's default: 64 MiB, three of them
per partition: 2.3 GiB of write buffers for 12 partitions, growing with the writes)."""
ROCKSDB_WRITE_BUFFERS = 2


def rocksdb_options(cache_mb: int, partitions: int) -> dict[str, int]:
    """The options of each partition's RocksDB database (faust opens one per partition):
    the block cache `cache_mb` shared out evenly over the partitions (faust's default
    gives each database 2 GiB), small write buffers (session records are ~1-5 KB, written
    once per session per commit)."""
    return {
        "block_cache_size": max(1, cache_mb * 1024 * 1024 // max(1, partitions)),
        "write_buffer_size": ROCKSDB_WRITE_BUFFER_BYTES,
        "max_write_buffer_number": ROCKSDB_WRITE_BUFFERS,
    }


def sessions_table(
    app: Any, name: str, *, partitions: int, cache_mb: int = 128
) -> tuple[SessionTable, ChangelogHook]:
    """A `SessionTable` of raw bytes keyed by session id, and the hook that receives its
    changelog records during recovery (set `hook.target` before the worker starts).
    `cache_mb`: the RocksDB block cache of the whole table (`rocksdb://` only)."""
    hook = ChangelogHook()
    table = app.Table(
        name,
        key_type=bytes,
        value_type=bytes,
        partitions=partitions,
        on_changelog_event=hook,
        options=rocksdb_options(cache_mb, partitions),
    )
    assert isinstance(table, SessionTable), "the app's Table class must be SessionTable"
    return table, hook
