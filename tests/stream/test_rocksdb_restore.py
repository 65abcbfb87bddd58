"""The restore's own apply of changelog records to the `rocksdb://` table's store
(`streams.kafka.faust_ext.rocksdb_restore`) against faust's: for random batches of puts
and tombstones over several partitions, both leave every partition's database with the
same keys, values and persisted offset, whether a partition's writes skip the WAL or not.
And the wiring: the worker's table gets the store with `rocksdb://` only; unlogged
partitions are settled before a logged write, at the end of recovery and on a rebalance."""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.types import TP
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.streams.kafka.faust_ext.changelog_hand_off import ChangelogRecord
from loopwatch.streams.worker.app import TABLE_NAME, create_app
from tests.stream.settings_for_tests import stream_settings
from tests.support.kafka_broker import in_ci

if not in_ci():  # CI installs the rocksdb extra (`make venv`): there a missing one fails
    pytest.importorskip("rocksdict", reason="the rocksdb extra: pip install -e '.[rocksdb]'")

from loopwatch.streams.kafka.faust_ext.rocksdb_restore import (
    SERVING_LEVEL0_FILES,
    RestoringStore,
)

PARTITIONS = 3

# One changelog record: (partition, key, value or None for a tombstone)
records = st.tuples(
    st.integers(0, PARTITIONS - 1),
    st.sampled_from([b"s-a", b"s-b", b"s-c", b"s-d", b"s-e"]),
    st.one_of(st.none(), st.binary(min_size=0, max_size=40)),
)
batches = st.lists(st.lists(records, max_size=30), min_size=1, max_size=6)
unlogged_sets = st.frozensets(st.integers(0, PARTITIONS - 1))


def _ours(data_dir: Path) -> RestoringStore:
    app = create_app(
        stream_settings(store_url="rocksdb://", data_dir=str(data_dir), partitions=PARTITIONS)
    )
    store = app.tables[TABLE_NAME].data
    assert isinstance(store, RestoringStore)
    return store


def _faust_table(data_dir: Path) -> Any:
    """A plain faust table in RocksDB (faust's own store and apply), raw bytes."""
    app = faust.App(
        "faust-rocksdb-reference",
        store="rocksdb://",
        datadir=str(data_dir),
        key_serializer="raw",
        value_serializer="raw",
    )
    table = app.Table(TABLE_NAME, key_type=bytes, value_type=bytes, partitions=PARTITIONS)
    assert type(table.data).__name__ == "Store" and not isinstance(table.data, RestoringStore)
    return table


def _contents(store: Any) -> dict[int, list[tuple[bytes, bytes]]]:
    """Every partition's database, offset key included."""
    return {p: list(store._db_for_partition(p).items()) for p in range(PARTITIONS)}


@contextmanager
def _stores() -> Iterator[tuple[RestoringStore, Any]]:
    with tempfile.TemporaryDirectory() as ours_dir, tempfile.TemporaryDirectory() as ref_dir:
        ours = _ours(Path(ours_dir))
        reference = _faust_table(Path(ref_dir))
        yield ours, reference
        ours._dbs.clear()
        reference.data._dbs.clear()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches, unlogged=st.lists(unlogged_sets, min_size=6, max_size=6))
def test_our_apply_leaves_the_store_as_fausts_does(
    batches: list[list[tuple[int, bytes, bytes | None]]], unlogged: list[frozenset[int]]
) -> None:
    with _stores() as (ours, reference):
        topic = ours.table.changelog_topic.get_topic_name()
        next_offset = dict.fromkeys(range(PARTITIONS), 0)
        for batch, without_wal in zip(batches, unlogged, strict=False):
            changelog = []
            for partition, key, value in batch:
                tp = TP(topic, partition)
                changelog.append(ChangelogRecord(tp, next_offset[partition], key, value))
                next_offset[partition] += 1 + (len(key) % 2)  # gaps: compacted offsets
            ours.write_changelog_records(changelog, unlogged={TP(topic, p) for p in without_wal})
            reference.apply_changelog_batch(changelog)
            assert _contents(ours) == _contents(reference.data)
        ours.settle()
        assert ours.unlogged_partitions == frozenset()
        assert _contents(ours) == _contents(reference.data)
        for p in range(PARTITIONS):
            tp = TP(topic, p)
            assert ours.persisted_offset(tp) == reference.data.persisted_offset(tp)


async def test_the_memory_store_stays_fausts(tmp_path: Path) -> None:
    app = create_app(stream_settings(data_dir=str(tmp_path)))
    assert not isinstance(app.tables[TABLE_NAME].data, RestoringStore)
    assert type(app.tables[TABLE_NAME].data).__module__ == "faust.stores.memory"


def _restoring(store: RestoringStore, partitions: set[int]) -> set[TP]:
    """The app's recovery as it is while `partitions` are restored as actives."""
    topic = store.table.changelog_topic.get_topic_name()
    recovery = store.app.tables.recovery
    actives = {TP(topic, p) for p in partitions}
    recovery.active_tps.update(actives)
    recovery.in_recovery = True
    return actives


async def test_active_partitions_under_recovery_skip_the_wal_until_settled(
    tmp_path: Path,
) -> None:
    store = _ours(tmp_path)
    topic = store.table.changelog_topic.get_topic_name()
    _restoring(store, {0})
    tp0, tp1 = TP(topic, 0), TP(topic, 1)
    store.table.apply_changelog_batch(
        [ChangelogRecord(tp0, 5, b"k0", b"v0"), ChangelogRecord(tp1, 7, b"k1", b"v1")]
    )
    assert store.unlogged_partitions == {0}, "the standby-like partition 1 is logged"
    assert store.persisted_offset(tp0) == 5 and store.persisted_offset(tp1) == 7
    db0 = store._db_for_partition(0)
    assert db0.property_int_value("rocksdb.num-entries-active-mem-table") == 2

    # normal processing notes a delivered changelog offset: the restored writes are
    # flushed first (a WAL write must not outlive unlogged ones in a crash)
    store.set_persisted_offset(tp0, 9)
    assert store.unlogged_partitions == frozenset()
    assert db0.property_int_value("rocksdb.num-entries-active-mem-table") == 1
    assert db0.get(b"k0") == b"v0" and store.persisted_offset(tp0) == 9


async def test_recovery_completed_and_rebalance_settle(tmp_path: Path) -> None:
    store = _ours(tmp_path)
    topic = store.table.changelog_topic.get_topic_name()
    actives = _restoring(store, {0, 1})
    store.table.apply_changelog_batch(
        [ChangelogRecord(TP(topic, p), 3, b"k", b"v") for p in (0, 1)]
    )
    assert store.unlogged_partitions == {0, 1}
    await store.on_recovery_completed(actives, set())
    assert store.unlogged_partitions == frozenset()
    for p in (0, 1):
        db = store._db_for_partition(p)
        assert db.property_int_value("rocksdb.num-entries-active-mem-table") == 0

    store.table.apply_changelog_batch([ChangelogRecord(TP(topic, 2), 4, b"k", b"v")])
    store.app.tables.recovery.active_tps.add(TP(topic, 2))
    store.table.apply_changelog_batch([ChangelogRecord(TP(topic, 2), 5, b"k", b"w")])
    assert store.unlogged_partitions == {2}
    await store.on_rebalance(set(), {TP(topic, 2)}, set())
    assert store.unlogged_partitions == frozenset()
    assert 2 not in store._dbs, "faust let go of the revoked partition's database"


def _restored_in_level0(store: RestoringStore, keys: int) -> tuple[Any, list[bytes], TP]:
    """Partition 0 restored (unlogged) from `keys` records in changelog order, not key
    order, with small memtables: many level-0 files, each spanning the keys."""
    topic = store.table.changelog_topic.get_topic_name()
    _restoring(store, {0})
    db = store._db_for_partition(0)
    db.set_options({"write_buffer_size": str(16 * 1024)})
    restored = [b"s-%05d" % n for n in range(keys)]
    random.Random(3).shuffle(restored)
    tp = TP(topic, 0)
    for start in range(0, len(restored), 100):  # a memtable (level-0 file) per batch or so
        batch = restored[start : start + 100]
        store.table.apply_changelog_batch(
            [ChangelogRecord(tp, start + n, key, key * 60) for n, key in enumerate(batch)]
        )
    assert store.unlogged_partitions == {0}
    return db, restored, tp


def test_settled_partitions_do_not_stop_writes_for_their_level0_files(tmp_path: Path) -> None:
    """RocksDB's default triggers stop writes from 36 level-0 files; a settled partition's
    are raised above what it is served with (rocksdb_restore)."""
    store = _ours(tmp_path)
    db, _, _ = _restored_in_level0(store, 6_000)
    store.settle()  # (right after it the compactions have only been scheduled)
    assert db.property_int_value("rocksdb.num-files-at-level0") >= 36
    assert db.property_int_value("rocksdb.is-write-stopped") == 0


async def test_recovery_completes_once_the_restored_level0_files_are_compacted(
    tmp_path: Path,
) -> None:
    """Reads check every level-0 file: recovery completes once a restored partition has
    fewer than `SERVING_LEVEL0_FILES`, `/ready` saying why it waits."""
    store = _ours(tmp_path)
    db, keys, tp = _restored_in_level0(store, 16_000)
    assert db.property_int_value("rocksdb.num-files-at-level0") >= SERVING_LEVEL0_FILES
    actives = set(store.app.tables.recovery.active_tps)

    completed = asyncio.ensure_future(store.on_recovery_completed(actives, set()))
    reasons: set[str] = set()
    while not completed.done():  # (the event loop stays free meanwhile)
        reasons.update(store.app.loopwatch_readiness.check()[1].get("reasons", ()))
        await asyncio.sleep(0)
    await completed

    assert "compacting the restored sessions table (partitions [0])" in reasons
    assert db.property_int_value("rocksdb.num-files-at-level0") < SERVING_LEVEL0_FILES
    assert db.property_int_value("rocksdb.is-write-stopped") == 0
    assert store.compacting == frozenset()
    assert all(db.get(key) == key * 60 for key in keys)
    assert store.persisted_offset(tp) == len(keys) - 1
