"""`streams.kafka.faust_ext.changelog_hand_off`: changelog records handed to the table
recovery per fetched batch, straight from the consumer, restore what faust's events
through the recovery loop restore: the same store, byte for byte, the same records to the
table's hook in the same order, the same offsets, counts and signals, for active and
standby partitions alike, a partition neither active nor standby passed over; records
fetched while the flow is stopped are not applied; other topics' records go on to
faust's fetch loop."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from loopwatch.streams.kafka.faust_ext.batch_recovery import BatchRecovery
from loopwatch.streams.kafka.faust_ext.changelog_hand_off import MAX_BATCH, ChangelogHandOff
from loopwatch.streams.kafka.faust_ext.offset_guard import FlowEvent
from loopwatch.streams.kafka.faust_ext.session_table import ChangelogHook
from loopwatch.streams.worker.app import TABLE_NAME, create_app
from tests.stream.settings_for_tests import stream_settings
from tests.stream.test_batch_recovery import active, changelog_event, recover


@dataclass
class Record:
    """What aiokafka's `getmany` returns per record (the part read here)."""

    offset: int
    key: bytes | None
    value: bytes | None


class Fetches:
    """faust's consumer below the mixin: each `_wait_next_records` returns the next fetch."""

    def __init__(self) -> None:
        self.fetches: list[dict[TP, list[Record]]] = []

    async def _wait_next_records(self, timeout: float) -> Any:
        return self.fetches.pop(0), None


class Consumer(ChangelogHandOff, Fetches):
    """faust's consumer state that the hand-off reads and writes, on a real app."""

    def __init__(self, app: Any, *, enabled: bool = True) -> None:
        super().__init__()
        self.app = app
        self.transport = SimpleNamespace(changelog_batches=enabled)
        self.flow_active = True
        self.suspend_flow = FlowEvent()
        self._read_offset: dict[TP, int | None] = defaultdict(lambda: None)
        self._buffered_partitions: set[TP] = set()

    def highwater(self, tp: TP) -> int:
        return 0


def received_by_the_hook(app: Any) -> list[Any]:
    hook = app.tables[TABLE_NAME]._on_changelog_event
    assert isinstance(hook, ChangelogHook)
    received: list[Any] = []
    hook.target = received.extend
    return received


def standby(app: Any, tp: TP, highwater: int) -> None:
    recovery = app.tables.recovery
    recovery.standby_tps.add(tp)
    recovery.tp_to_table[tp] = app.tables[TABLE_NAME]
    recovery.standby_offsets[tp] = -1
    recovery.standby_highwaters[tp] = highwater


def changelog(seed: int, count: int) -> list[tuple[int, int, bytes, bytes | None]]:
    """(partition, offset, key, value): a changelog of 3 partitions (0 active, 1 standby,
    2 neither), offsets with holes (compaction), keys written again, tombstones, in a
    fetch order that interleaves the partitions. (No empty values, which a session record
    never is: faust's memory store deletes a key whose last value in an applied buffer is
    empty if the buffer also held a tombstone of it, so where buffers are cut, which
    differs between faust's loop, `BatchRecovery`'s and this path, would show.)"""
    rng = random.Random(seed)
    offsets = [0, 0, 0]
    records = []
    for _ in range(count):
        partition = rng.choice((0, 0, 0, 1, 1, 2))
        offsets[partition] += rng.choice((1, 1, 1, 2, 5))
        value = rng.choice((None, b"\x02header{}", b"v%d" % rng.randrange(10**6)))
        key = b"s%d" % rng.randrange(60)
        records.append((partition, offsets[partition], key, value))
    return records


def setup(app: Any, records: list[tuple[int, int, bytes, bytes | None]]) -> list[TP]:
    table = app.tables[TABLE_NAME]
    table.recovery_buffer_size = 37  # buffers applied along the way and at the end
    table.standby_buffer_size = 23
    tps = [TP(table.changelog_topic.get_topic_name(), p) for p in range(3)]
    last = {p: max((o for q, o, _, _ in records if q == p), default=0) for p in range(3)}
    standby(app, tps[1], highwater=last[1])
    active(app, tps[0], highwater=last[0])
    return tps


def fetches(
    tps: list[TP], records: list[tuple[int, int, bytes, bytes | None]], rng: random.Random
) -> list[dict[TP, list[Record]]]:
    """The records in fetches of a few per partition, some fetched again (a seek back)."""
    out: list[dict[TP, list[Record]]] = []
    at = 0
    while at < len(records):
        size = rng.randrange(1, 60)
        fetch: dict[TP, list[Record]] = {}
        for partition, offset, key, value in records[at : at + size]:
            fetch.setdefault(tps[partition], []).append(Record(offset, key, value))
        if out and rng.random() < 0.3:  # the previous fetch's tail again
            for tp, again in out[-1].items():
                fetch[tp] = again[-2:] + fetch.get(tp, [])
        out.append(fetch)
        at += size
    return out


def seen(received: list[Any]) -> list[tuple[int, int, bytes, bytes | None]]:
    return [(m.partition, m.offset, m.key, m.value) for m in received]


@pytest.mark.parametrize("seed", range(6))
async def test_fetched_batches_restore_what_faust_events_restore(seed: int) -> None:
    records = changelog(seed, 900)
    by_events = create_app(stream_settings(partitions=3))
    tps = setup(by_events, records)
    fetched = fetches(tps, records, random.Random(seed))
    events = [  # faust's path: each fetched record an event, in the fetch's order
        changelog_event(by_events, tp, record.offset, record.key, record.value)
        for fetch in fetched
        for tp, batch in fetch.items()
        for record in batch
    ]
    queue_received = await recover(by_events, events)

    by_batches = create_app(stream_settings(partitions=3))
    setup(by_batches, records)
    batch_received = received_by_the_hook(by_batches)
    consumer = Consumer(by_batches)
    by_batches.flow_control.resume()  # (as a started worker has it)
    consumer.fetches = fetched
    while consumer.fetches:
        left, _ = await consumer._wait_next_records(1.0)
        assert left == {}, "changelog records all go to recovery"

    assert seen(batch_received) == seen(queue_received)
    assert {partition for partition, *_ in seen(batch_received)} == {0, 1}
    one, other = by_events.tables.recovery, by_batches.tables.recovery
    for recovery in (one, other):
        recovery.flush_buffers()  # (the standby's buffer too)
    assert by_batches.tables[TABLE_NAME].data.data == by_events.tables[TABLE_NAME].data.data
    assert dict(other.active_offsets) == dict(one.active_offsets)
    assert dict(other.standby_offsets) == dict(one.standby_offsets)
    assert other.records_read == one.records_read
    assert not other.in_recovery and other.signal_recovery_end.is_set()
    assert by_batches.tables.standbys_ready
    assert consumer._read_offset[tps[2]] == max(o for p, o, _, _ in records if p == 2)


async def test_a_fetch_larger_than_a_batch_is_read_in_order() -> None:
    app = create_app(stream_settings())
    table = app.tables[TABLE_NAME]
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    count = 2 * MAX_BATCH + 5
    active(app, tp, highwater=count - 1)
    received = received_by_the_hook(app)
    app.flow_control.resume()
    consumer = Consumer(app)
    consumer.fetches = [{tp: [Record(n, b"s%d" % (n % 7), b"v%d" % n) for n in range(count)]}]
    await consumer._wait_next_records(1.0)
    assert [m.offset for m in received] == list(range(count))
    assert app.tables.recovery.records_read == count
    assert not app.in_recovery
    assert table.data.data[b"s3"] == b"v%d" % max(n for n in range(count) if n % 7 == 3)


async def test_other_topics_go_on_and_a_stopped_flow_applies_nothing() -> None:
    app = create_app(stream_settings())
    table = app.tables[TABLE_NAME]
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    events = TP("events", 0)
    active(app, tp, highwater=5)
    received = received_by_the_hook(app)
    app.flow_control.resume()
    consumer = Consumer(app)
    fetch = {tp: [Record(n, b"k", b"v") for n in range(3)], events: [Record(9, b"e", b"{}")]}
    consumer.suspend_flow.set()  # a rebalance began
    consumer.fetches = [dict(fetch)]
    left, _ = await consumer._wait_next_records(1.0)
    assert left == {events: fetch[events]}
    assert received == [] and consumer._read_offset[tp] is None
    assert app.tables.recovery.active_offsets[tp] == -1

    consumer.suspend_flow.clear()
    app.flow_control.suspend()
    consumer.fetches = [dict(fetch)]
    await consumer._wait_next_records(1.0)
    assert received == [], "the app's flow control suspended: nothing either"

    app.flow_control.resume()
    consumer.fetches = [dict(fetch)]
    left, _ = await consumer._wait_next_records(1.0)
    assert left == {events: fetch[events]}
    assert [m.offset for m in received] == [0, 1, 2]
    assert consumer._read_offset[tp] == 2
    assert app.in_recovery, "offsets 3-5 still to read"


async def test_off_faust_gets_the_changelog_records() -> None:
    app = create_app(stream_settings())
    table = app.tables[TABLE_NAME]
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    active(app, tp, highwater=5)
    app.flow_control.resume()
    consumer = Consumer(app, enabled=False)
    fetch = {tp: [Record(0, b"k", b"v")]}
    consumer.fetches = [dict(fetch)]
    left, _ = await consumer._wait_next_records(1.0)
    assert left == fetch


async def test_a_new_recovery_does_not_see_the_previous_ones_end() -> None:
    app = create_app(stream_settings())
    table = app.tables[TABLE_NAME]
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    active(app, tp, highwater=1)
    received_by_the_hook(app)
    app.flow_control.resume()
    consumer = Consumer(app)
    consumer.fetches = [{tp: [Record(0, b"a", b"1"), Record(1, b"b", b"2")]}]
    await consumer._wait_next_records(1.0)
    recovery = app.tables.recovery
    assert isinstance(recovery, BatchRecovery)
    assert recovery.signal_recovery_end.is_set() and not app.in_recovery

    recovery.active_highwaters[tp] = 3  # records written since; a rebalance
    recovery._set_recovery_started()
    assert not recovery.signal_recovery_end.is_set()
    consumer.fetches = [{tp: [Record(2, b"a", b"3")]}]
    await consumer._wait_next_records(1.0)
    assert not recovery.signal_recovery_end.is_set() and app.in_recovery
    consumer.fetches = [{tp: [Record(3, b"c", b"4")]}]
    await consumer._wait_next_records(1.0)
    assert recovery.signal_recovery_end.is_set() and not app.in_recovery
    assert table.data.data == {b"a": b"3", b"b": b"2", b"c": b"4"}
