"""`SessionTable._announce_stored`: once recovery is done, the records a `rocksdb://` store
kept for a newly assigned partition go to the changelog hook as if recovery had read them
(the worker rebuilds its expiry index from them): every stored record of that partition
and none of another, as `StoredRecord`s in batches of at most `STORED_RECORDS_PER_YIELD`,
without faust's per-record `Message` and `Event`; an `on_changelog_event` that is not the
hook still gets faust's events, one by one. A partition revoked meanwhile stops it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from faust.types import TP

from loopwatch.streams.kafka.faust_ext import session_table
from loopwatch.streams.kafka.faust_ext.session_table import (
    ChangelogHook,
    SessionTable,
    StoredRecord,
)
from loopwatch.streams.worker.app import TABLE_NAME, create_app
from tests.stream.settings_for_tests import stream_settings
from tests.support.kafka_broker import in_ci

if not in_ci():  # CI installs the rocksdb extra (`make venv`): there a missing one fails
    pytest.importorskip("rocksdict", reason="the rocksdb extra: pip install -e '.[rocksdb]'")

from loopwatch.streams.kafka.faust_ext.rocksdb_restore import RestoringStore

PARTITIONS = 2


class NoOutputs:
    def add_changelog(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        pass


def _stored_table(data_dir: Path) -> tuple[SessionTable, dict[int, dict[bytes, bytes]]]:
    """A `rocksdb://` table holding records in both partitions (the second one's records
    must never be announced for the first)."""
    app = create_app(
        stream_settings(store_url="rocksdb://", data_dir=str(data_dir), partitions=PARTITIONS)
    )
    table = app.tables[TABLE_NAME]
    assert isinstance(table, SessionTable) and isinstance(table.data, RestoringStore)
    table.outputs = NoOutputs()
    stored = {
        0: {b"s-0-%02d" % i: b"record %d" % i for i in range(7)},
        1: {b"s-1-%02d" % i: b"other %d" % i for i in range(3)},
    }
    for partition, records in stored.items():
        table.write_all(partition, list(records.items()))
    return table, stored


def _tp(table: SessionTable, partition: int) -> TP:
    return TP(table.changelog_topic.get_topic_name(), partition)


def _assigned(table: SessionTable, monkeypatch: pytest.MonkeyPatch, tps: set[TP]) -> None:
    monkeypatch.setattr(table.app.assignor, "assigned_actives", lambda: tps)


def _hook_batches(table: SessionTable, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """What the table's changelog hook is handed, batch by batch (3 records at most)."""
    hook = table._on_changelog_event
    assert isinstance(hook, ChangelogHook)
    batches: list[list[Any]] = []
    hook.target = batches.append
    monkeypatch.setattr(session_table, "STORED_RECORDS_PER_YIELD", 3)
    return batches


async def test_the_hook_gets_every_stored_record_of_the_partition_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, stored = _stored_table(tmp_path)
    batches = _hook_batches(table, monkeypatch)
    tp = _tp(table, 0)
    _assigned(table, monkeypatch, {tp})

    await table._announce_stored(tp)

    assert [len(batch) for batch in batches] == [3, 3, 1]
    records = [record for batch in batches for record in batch]
    assert all(type(record) is StoredRecord for record in records)
    assert sorted(records) == [StoredRecord(0, k, v) for k, v in sorted(stored[0].items())]
    table.data._dbs.clear()  # type: ignore[attr-defined]


async def test_a_partition_revoked_meanwhile_is_not_announced_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, _ = _stored_table(tmp_path)
    batches = _hook_batches(table, monkeypatch)
    _assigned(table, monkeypatch, set())  # revoked before its first yield

    await table._announce_stored(_tp(table, 0))

    assert [len(batch) for batch in batches] == [3]
    table.data._dbs.clear()  # type: ignore[attr-defined]


async def test_another_changelog_callback_gets_fausts_events_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, stored = _stored_table(tmp_path)
    events: list[Any] = []

    async def on_changelog_event(event: Any) -> None:
        events.append(event)

    table._on_changelog_event = on_changelog_event
    tp = _tp(table, 1)
    _assigned(table, monkeypatch, {tp})

    await table._announce_stored(tp)

    got = sorted((e.message.tp, e.message.partition, e.key, e.value) for e in events)
    assert got == [(tp, 1, k, v) for k, v in sorted(stored[1].items())]
    table.data._dbs.clear()  # type: ignore[attr-defined]
