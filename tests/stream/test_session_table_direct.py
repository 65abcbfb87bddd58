"""`SessionTable.write_all` and `stored` straight on the `rocksdb://` store's databases
against faust's per-key path (`table[key] = value`, `del table[key]` under `writing_in`):
for random batches of puts and deletes over several partitions, both leave every
partition's database with the same keys and values and send the same changelog records,
in the same order. A direct write settles unlogged partitions first, as faust's does."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from faust.types import TP
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.streams.kafka.faust_ext.changelog_hand_off import ChangelogRecord
from loopwatch.streams.kafka.faust_ext.session_table import SessionTable
from loopwatch.streams.worker.app import TABLE_NAME, create_app
from tests.stream.settings_for_tests import stream_settings
from tests.support.kafka_broker import in_ci

if not in_ci():  # CI installs the rocksdb extra (`make venv`): there a missing one fails
    pytest.importorskip("rocksdict", reason="the rocksdb extra: pip install -e '.[rocksdb]'")

from loopwatch.streams.kafka.faust_ext.rocksdb_restore import RestoringStore

PARTITIONS = 3

Changelog = list[tuple[str, int, bytes, bytes | None]]


def _writes(partition: int) -> st.SearchStrategy[list[tuple[bytes, bytes | None]]]:
    """Writes to keys of `partition` (a session's key belongs to one partition)."""
    keys = st.sampled_from([b"s-%d-%d" % (partition, i) for i in range(3)])
    return st.lists(
        st.tuples(keys, st.one_of(st.none(), st.binary(min_size=0, max_size=30))), max_size=8
    )


batches = st.lists(
    st.integers(0, PARTITIONS - 1).flatmap(lambda p: st.tuples(st.just(p), _writes(p))),
    min_size=1,
    max_size=8,
)


class RecordingOutputs:
    def __init__(self) -> None:
        self.changelog: Changelog = []

    def add_changelog(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        self.changelog.append((topic, partition, key, value))


def _table(data_dir: Path, *, direct: bool) -> tuple[SessionTable, RecordingOutputs]:
    app = create_app(
        stream_settings(store_url="rocksdb://", data_dir=str(data_dir), partitions=PARTITIONS)
    )
    table = app.tables[TABLE_NAME]
    assert isinstance(table, SessionTable)
    assert isinstance(table.data, RestoringStore)
    if not direct:
        table._restoring = None  # faust's per-key path
    outputs = table.outputs = RecordingOutputs()
    return table, outputs


def _contents(table: SessionTable) -> dict[int, list[tuple[bytes, bytes]]]:
    store = table.data
    assert isinstance(store, RestoringStore)
    return {p: list(store._db_for_partition(p).items()) for p in range(PARTITIONS)}


@contextmanager
def _tables() -> Iterator[tuple[tuple[SessionTable, RecordingOutputs], ...]]:
    with tempfile.TemporaryDirectory() as direct_dir, tempfile.TemporaryDirectory() as ref_dir:
        direct = _table(Path(direct_dir), direct=True)
        reference = _table(Path(ref_dir), direct=False)
        yield direct, reference
        for table, _ in (direct, reference):
            store = table.data
            assert isinstance(store, RestoringStore)
            store._dbs.clear()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches)
def test_direct_writes_equal_fausts_per_key_path(
    batches: list[tuple[int, list[tuple[bytes, bytes | None]]]],
) -> None:
    with _tables() as ((direct, direct_log), (reference, reference_log)):
        assert direct._direct_store() is not None and reference._direct_store() is None
        for partition, batch in batches:
            direct.write_all(partition, batch)
            reference.write_all(partition, batch)
            assert _contents(direct) == _contents(reference)
            for key in {key for key, _ in batch}:
                with direct.writing_in(partition), reference.writing_in(partition):
                    assert direct.stored(key) == reference.stored(key) == reference.get(key)
        assert direct_log.changelog == reference_log.changelog


def test_a_direct_write_settles_unlogged_partitions(tmp_path: Path) -> None:
    table, outputs = _table(tmp_path, direct=True)
    store = table.data
    assert isinstance(store, RestoringStore)
    topic = table.changelog_topic.get_topic_name()
    store.write_changelog_records(
        [ChangelogRecord(TP(topic, 1), 0, b"s-a", b"old")], unlogged={TP(topic, 1)}
    )
    assert store.unlogged_partitions == frozenset({1})
    table.write_all(1, [(b"s-a", b"new"), (b"s-b", None)])
    assert store.unlogged_partitions == frozenset()
    assert outputs.changelog == [(table._changelog_name(), 1, b"s-a", b"new")]
    with table.writing_in(1):
        assert table.stored(b"s-a") == b"new"
    store._dbs.clear()


def test_the_memory_store_takes_fausts_path(tmp_path: Path) -> None:
    app = create_app(stream_settings(data_dir=str(tmp_path)))
    table = app.tables[TABLE_NAME]
    assert isinstance(table, SessionTable)
    assert table._direct_store() is None
    outputs = table.outputs = RecordingOutputs()
    table.write_all(0, [(b"s-a", b"v"), (b"s-b", None)])
    assert outputs.changelog == [(table._changelog_name(), 0, b"s-a", b"v")]
    with table.writing_in(0):
        assert table.stored(b"s-a") == b"v"
