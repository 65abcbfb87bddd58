"""`TableSessionStore.write_pending_in_turns`: the commit's session writes, a few per
event-loop turn, with events processed in between (the worker's commit hook)."""

from __future__ import annotations

import asyncio

import pytest

from loopwatch.streams.worker.record import SessionRecord
from loopwatch.streams.worker.table_store import TableSessionStore
from tests.support.pipeline import NOW, FakeTable


def record(seq: int) -> SessionRecord:
    return SessionRecord(state=None, last_seq=seq, last_ts=NOW)


def note(store: TableSessionStore, table: FakeTable, partition: int, sid: str, seq: int) -> None:
    table.partition = partition
    store.set(sid, record(seq))


async def writing_after_one_turn(
    sessions: int, partitions: int, per_turn: int
) -> tuple[FakeTable, TableSessionStore, asyncio.Future[None]]:
    """A deferred store with `sessions` noted records (session n in partition n %
    `partitions`), and its commit's write started and through its first turn: the
    writer yields one loop turn per `per_turn` records, so one turn of the test's own
    (`sleep(0)`: a turn of the event loop, not a wait for time) lets exactly that run."""
    table = FakeTable()
    store = TableSessionStore(table, deferred=True)
    for n in range(sessions):
        note(store, table, n % partitions, f"s{n}", 1)
    writing = asyncio.ensure_future(store.write_pending_in_turns(per_turn=per_turn))
    await asyncio.sleep(0)
    return table, store, writing


def stored_seq(table: FakeTable, sid: str) -> int | None:
    value = table.get(sid.encode())
    return None if value is None else SessionRecord.decode(value).last_seq


async def test_records_are_written_a_turn_at_a_time_and_read_back_until_written() -> None:
    table, store, writing = await writing_after_one_turn(5, partitions=2, per_turn=2)
    assert not writing.done()
    assert len(table.changelog) == 2
    # An event processed between two turns reads the noted record, not the table's.
    for n in range(5):
        got = store.get(f"s{n}")
        assert got is not None and got.last_seq == 1
    assert store.pending == 3
    await writing
    assert store.pending == 0
    assert sorted(key for _, key, _ in table.changelog) == [f"s{n}".encode() for n in range(5)]
    # each record in its session's partition
    assert all(partition == int(key[1:]) % 2 for partition, key, _ in table.changelog)


async def test_a_record_noted_during_the_write_is_the_one_read_and_written_last() -> None:
    table, store, writing = await writing_after_one_turn(4, partitions=1, per_turn=1)
    note(store, table, 0, "s3", 2)  # s3 is still waiting for its turn
    got = store.get("s3")
    assert got is not None and got.last_seq == 2
    await writing
    assert stored_seq(table, "s3") == 1  # the commit wrote the record it took
    assert store.pending == 1
    await store.write_pending_in_turns()  # the next commit writes the newer one
    assert stored_seq(table, "s3") == 2
    assert [key for _, key, _ in table.changelog].count(b"s3") == 2


async def test_a_newer_record_taken_by_a_later_write_replaces_the_unwritten_one() -> None:
    table, store, writing = await writing_after_one_turn(3, partitions=1, per_turn=1)
    note(store, table, 0, "s2", 2)
    store.write_pending()  # at once (too many sessions noted): takes the rest too
    assert store.pending == 0
    await writing
    assert stored_seq(table, "s2") == 2
    assert [key for _, key, _ in table.changelog].count(b"s2") == 1


async def test_revoked_partitions_are_not_written_and_a_cancelled_write_resumes() -> None:
    table, store, writing = await writing_after_one_turn(6, partitions=2, per_turn=1)
    store.forget_partitions({1})
    writing.cancel()
    await asyncio.gather(writing, return_exceptions=True)
    written = len(table.changelog)
    assert 0 < written < 3
    await store.write_pending_in_turns()  # the next commit's write takes the rest
    assert sorted(table) == [b"s0", b"s2", b"s4"]
    assert all(partition == 0 for partition, _, _ in table.changelog)


@pytest.mark.parametrize("deferred", [True, False], ids=["at_the_commit", "per_event"])
def test_a_write_keeps_only_the_verdicts_still_in_flight(deferred: bool) -> None:
    """Of a record's unconfirmed verdicts and episodes, the write (the commit's, or each
    event's without deferred writes) keeps those whose sends are not all acknowledged
    yet (a replay must send them again) and leaves out the rest: they are stored in
    their topics already, and the pipeline may carry them behind one still in flight."""
    table = FakeTable()
    store = TableSessionStore(table, deferred=deferred)
    deliveries = store.deliveries
    acked, in_flight = deliveries.sending(("s", 1)), deliveries.sending(("s", 2), records=2)
    deliveries.delivered(("s", 1), acked)
    deliveries.delivered(("s", 2), in_flight)  # one of its two records: still in flight
    noted = SessionRecord(
        state=None,
        last_seq=2,
        last_ts=NOW,
        unconfirmed=((1, b'{"v":1}'), (2, b'{"v":2}')),
        unconfirmed_episodes=((1, b'{"e":1}'), (2, b'{"e":2}')),
    )
    store.set("s", noted)
    store.write_pending()
    written = SessionRecord.decode(table[b"s"])
    assert written.unconfirmed == ((2, b'{"v":2}'),)
    assert written.unconfirmed_episodes == ((2, b'{"e":2}'),)
    assert store.get("s") == written

    deliveries.delivered(("s", 2), in_flight)
    store.set("s", noted)
    store.write_pending()
    written = SessionRecord.decode(table[b"s"])
    assert (written.unconfirmed, written.unconfirmed_episodes) == ((), ())
    assert (written.last_seq, written.last_ts) == (2, NOW)
