"""`streams.kafka.faust_ext.batch_recovery`: faust's recovery loop per batch of changelog
records keeps what faust's per-record loop did: the newest value of each key in the
store, tombstones deleting, records at or below a partition's offset passed over, every
new record handed to the table's changelog hook in offset order, recovery ended once
the active partitions are read to their high-water marks, standbys signalled ready."""

from __future__ import annotations

import asyncio
from typing import Any

from faust.types import TP
from faust.types.tuples import Message

from loopwatch.streams.kafka.faust_ext.batch_recovery import MAX_BATCH, BatchRecovery
from loopwatch.streams.kafka.faust_ext.session_table import ChangelogHook, RawChangelogTopic
from loopwatch.streams.worker.app import TABLE_NAME, create_app
from tests.stream.settings_for_tests import stream_settings


def changelog_event(app: Any, tp: TP, offset: int, key: bytes, value: bytes | None) -> Any:
    message = Message(tp.topic, tp.partition, offset, 0.0, 0, [], key, value, None, tp=tp)
    return app.create_event(key, value, [], message)


async def recover(app: Any, events: list[Any]) -> list[Any]:
    """Run the recovery loop over `events` until it ends recovery; the messages its
    table's changelog hook received."""
    table = app.tables[TABLE_NAME]
    hook = table._on_changelog_event
    assert isinstance(hook, ChangelogHook)
    received: list[Any] = []
    hook.target = received.extend
    recovery = app.tables.recovery
    assert isinstance(recovery, BatchRecovery)
    queue = app.tables.changelog_queue
    app.flow_control.resume()  # (as a started worker has it)

    async def fetch() -> None:  # as the consumer does: waiting while the queue is full
        for event in events:
            await queue.put(event)

    ended = recovery.signal_recovery_end
    loop = asyncio.ensure_future(recovery._slurp_changelogs(recovery))
    fetching = asyncio.ensure_future(fetch())
    try:
        await asyncio.wait_for(ended.wait(), timeout=60)  # (a bound on a failure only)
        await fetching
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    return received


def active(app: Any, tp: TP, highwater: int) -> None:
    recovery = app.tables.recovery
    recovery.active_tps.add(tp)
    recovery.tp_to_table[tp] = app.tables[TABLE_NAME]
    recovery.active_offsets[tp] = -1
    recovery.active_highwaters[tp] = highwater
    recovery._set_recovery_started()


async def test_the_store_gets_each_keys_newest_value_and_the_hook_every_new_record() -> None:
    app = create_app(stream_settings())
    table = app.tables[TABLE_NAME]
    table.recovery_buffer_size = 7  # buffers applied along the way and at the end
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    stranger = TP("another-changelog", 0)
    count = 3 * MAX_BATCH + 11  # more than one batch
    events = [changelog_event(app, tp, n, b"s%d" % (n % 50), b"v%d" % n) for n in range(count)]
    events.insert(100, changelog_event(app, tp, 5, b"s5", b"stale"))  # read before
    events.insert(200, changelog_event(app, stranger, 9, b"s9", b"stranger"))
    events.append(changelog_event(app, tp, count, b"s1", None))  # a tombstone
    active(app, tp, highwater=count)

    received = await recover(app, events)

    assert [message.offset for message in received] == list(range(count + 1))
    assert all(message.tp == tp for message in received)
    data = table.data.data  # the memory store's dict
    assert b"s1" not in data
    assert data[b"s2"] == b"v%d" % max(n for n in range(count) if n % 50 == 2)
    assert len(data) == 49
    recovery = app.tables.recovery
    assert not recovery.in_recovery and not app.in_recovery
    assert recovery.active_offsets[tp] == count
    assert recovery.buffers[table] == []


async def test_a_standby_partition_is_applied_and_signals_ready() -> None:
    app = create_app(stream_settings(partitions=2))
    table = app.tables[TABLE_NAME]
    recovery = app.tables.recovery
    mine = TP(table.changelog_topic.get_topic_name(), 0)
    standby = TP(table.changelog_topic.get_topic_name(), 1)
    recovery.standby_tps.add(standby)
    recovery.tp_to_table[standby] = table
    recovery.standby_offsets[standby] = -1
    recovery.standby_highwaters[standby] = 2
    active(app, mine, highwater=0)
    events = [
        changelog_event(app, standby, 0, b"a", b"1"),
        changelog_event(app, standby, 1, b"b", b"2"),
        changelog_event(app, mine, 0, b"c", b"3"),
        changelog_event(app, standby, 2, b"a", b"4"),
    ]
    assert not app.tables.standbys_ready

    received = await recover(app, events)

    assert [(m.partition, m.offset) for m in received] == [(1, 0), (1, 1), (0, 0), (1, 2)]
    assert recovery.standby_offsets[standby] == 2
    assert app.tables.standbys_ready
    recovery.flush_buffers()
    assert table.data.data == {b"a": b"4", b"b": b"2", b"c": b"3"}


async def test_the_changelog_hands_its_records_over_as_they_are() -> None:
    app = create_app(stream_settings())
    table = app.tables[TABLE_NAME]
    channel = table.changelog_topic.clone_using_queue(app.tables.changelog_queue)
    assert isinstance(channel, RawChangelogTopic)  # what the table manager reads from
    app.flow_control.resume()  # (as a started worker has it)
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    for value in (b"\x02\x01not json", None):
        message = Message(tp.topic, 0, 3, 0.0, 0, [], b"s1", value, None, tp=tp)
        await asyncio.wait_for(channel.deliver(message), timeout=60)  # (room in the queue)
        event = app.tables.changelog_queue.get_nowait()
        assert (event.key, event.value, event.message) == (b"s1", value, message)


async def test_the_records_read_are_counted_not_the_offsets_a_compaction_left_out() -> None:
    app = create_app(stream_settings())
    table = app.tables[TABLE_NAME]
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    # a compacted changelog: every third offset left, read again from the start
    events = [changelog_event(app, tp, n, b"s%d" % n, b"v") for n in range(0, 3 * 1000, 3)]
    events.insert(10, changelog_event(app, tp, 3, b"s3", b"again"))  # read before: no count
    active(app, tp, highwater=events[-1].message.offset)
    recovery = app.tables.recovery
    before = recovery.records_read

    await recover(app, events)

    assert recovery.records_read - before == 1000
