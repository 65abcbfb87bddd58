"""`streams.kafka.faust_ext.batch_hand_off`: a partition's fetched records handed over as
one batch, with per batch what faust's fetch loop and the inline callback do per record:
skip a batch of an earlier generation or one fetched while the flow is stopped, track it
(a rebalance waits for it), ack the processed records at once (only those: a rebalance
that stops the flow splits the batch), keep faust's read offsets and gaps."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from faust.types import TP, Message

from loopwatch.streams.kafka.faust_ext.batch_hand_off import BatchHandOff, BatchProgress
from loopwatch.streams.kafka.faust_ext.offset_guard import FlowEvent

EVENTS = TP("events", 0)


@dataclass
class Record:
    """What aiokafka's `getmany` returns per record (the part used here)."""

    offset: int


class Monitor:
    def __init__(self) -> None:
        self.stream_inbound_time: dict[TP, float] = {}
        self.end_offsets: dict[TP, int] = {}

    def track_tp_end_offset(self, tp: TP, offset: int) -> None:
        self.end_offsets[tp] = offset


class FlowControl:
    active = True

    def is_active(self) -> bool:
        return self.active


class App:
    def __init__(self) -> None:
        self.monitor = Monitor()
        self.consumer_generation_id = 3
        self.flow_control = FlowControl()


class Consumer(BatchHandOff):
    """faust's consumer state that the batch hand-off reads and writes."""

    def __init__(self) -> None:
        self.app = App()
        self.suspend_flow = FlowEvent()
        self.flow_active = True
        self.fetched_waiting = 0
        self._acked: dict[TP, list[int]] = defaultdict(list)
        self._acked_index: dict[TP, set[int]] = defaultdict(set)
        self._committed_offset: dict[TP, int | None] = defaultdict(lambda: None)
        self._unacked_messages: set[Any] = set()
        self._waiting_for_ack: Any = None
        self._read_offset: dict[TP, int | None] = defaultdict(lambda: None)
        self._n_acked = 0
        self._commit_every = None
        self._buffered_partitions: set[TP] = set()
        self.gaps: list[tuple[int, int]] = []

    def highwater(self, tp: TP) -> int:
        return 100

    def _to_message(self, tp: TP, record: Record) -> Message:
        return Message(tp.topic, tp.partition, record.offset, 0.0, 0, [], b"s", b"{}", None, tp=tp)

    async def _add_gap(self, tp: TP, start: int, end: int) -> None:
        self.gaps.append((start, end))


class Processing:
    """A batch callback that processes each record (noting it and whether the batch was
    tracked meanwhile) until `stop_after` records, when it stops the flow (a rebalance)."""

    def __init__(self, consumer: Consumer, stop_after: int | None = None) -> None:
        self.consumer = consumer
        self.stop_after = stop_after
        self.seen: list[tuple[int, bool]] = []

    async def __call__(self, tp: TP, messages: Sequence[Message], progress: BatchProgress) -> None:
        for message in messages:
            if not progress.go_on():
                return
            if self.stop_after is not None and progress.done == self.stop_after:
                self.consumer.suspend_flow.set()  # a rebalance begins
                continue
            self.seen.append((message.offset, bool(self.consumer._unacked_messages)))
            progress.done += 1


async def _hand(consumer: Consumer, records: dict[TP, list[Record]], process: Any) -> None:
    await consumer._hand_over(records, None, {"events": process})


async def test_a_batch_is_tracked_while_processed_then_acked_at_once() -> None:
    consumer = Consumer()
    process = Processing(consumer)
    await _hand(consumer, {EVENTS: [Record(o) for o in (4, 5, 6)]}, process)
    assert process.seen == [(4, True), (5, True), (6, True)], "tracked while processed"
    assert consumer._unacked_messages == set(), "untracked after"
    assert consumer._acked[EVENTS] == [4, 5, 6]
    assert consumer._n_acked == 3
    assert consumer._read_offset[EVENTS] == 6
    assert EVENTS in consumer.app.monitor.stream_inbound_time
    assert consumer.fetched_waiting == 0
    assert not consumer.handing_over


async def test_a_rebalance_splits_a_batch_the_rest_is_neither_processed_nor_acked() -> None:
    consumer = Consumer()
    process = Processing(consumer, stop_after=2)
    await _hand(consumer, {EVENTS: [Record(o) for o in range(10, 15)]}, process)
    assert [offset for offset, _ in process.seen] == [10, 11]
    assert consumer._acked[EVENTS] == [10, 11], "only the processed ones may be committed"
    assert consumer._read_offset[EVENTS] == 11
    assert consumer._unacked_messages == set(), "the rebalance's wait_empty may go on"


@pytest.mark.parametrize("stopped", ["generation", "suspended", "flow_control"])
async def test_a_batch_from_before_a_rebalance_is_skipped_unacked(stopped: str) -> None:
    consumer = Consumer()
    if stopped == "suspended":
        consumer.suspend_flow.set()
    if stopped == "flow_control":
        consumer.app.flow_control.active = False
    process = Processing(consumer)
    records = {EVENTS: [Record(1), Record(2)]}
    if stopped == "generation":
        # the generation changes after the fetch, before this partition's batch
        async def later(tp: TP, messages: Sequence[Message], progress: BatchProgress) -> None:
            await process(tp, messages, progress)

        consumer.app.consumer_generation_id = 3
        await consumer._batch(EVENTS, records[EVENTS], later, generation=2)
    else:
        await consumer._batch(EVENTS, records[EVENTS], process, generation=3)
    assert process.seen == []
    assert consumer._acked[EVENTS] == []
    assert consumer._unacked_messages == set()


async def test_stale_records_are_dropped_and_holes_noted_as_gaps_as_faust_does() -> None:
    consumer = Consumer()
    consumer._read_offset[EVENTS] = 5
    process = Processing(consumer)
    await _hand(consumer, {EVENTS: [Record(o) for o in (3, 4, 5, 6, 9, 10)]}, process)
    assert [offset for offset, _ in process.seen] == [5, 6, 9, 10], "below the read offset: dropped"
    assert consumer.gaps == [(7, 9)], "offsets 7 and 8 hold no records (faust's _add_gap)"


async def test_offsets_acked_before_or_below_the_committed_one_are_not_acked_again() -> None:
    consumer = Consumer()
    consumer._committed_offset[EVENTS] = 5
    consumer._acked_index[EVENTS].add(6)
    consumer._acked[EVENTS].append(6)
    process = Processing(consumer)
    await _hand(consumer, {EVENTS: [Record(o) for o in (5, 6, 7)]}, process)
    assert consumer._acked[EVENTS] == [6, 5, 7]
    assert consumer._acked_index[EVENTS] == {5, 6, 7}
    assert consumer._n_acked == 2


async def test_a_failure_acks_the_records_processed_before_it_and_goes_on() -> None:
    consumer = Consumer()

    async def failing(tp: TP, messages: Sequence[Message], progress: BatchProgress) -> None:
        progress.done += 1  # the first processed
        raise RuntimeError("the outputs failed")

    with pytest.raises(RuntimeError, match="outputs failed"):
        await _hand(consumer, {EVENTS: [Record(1), Record(2)]}, failing)
    assert consumer._acked[EVENTS] == [1], "the failed record stays unacked: read again"
    assert consumer._unacked_messages == set()
    assert not consumer.handing_over


async def test_a_rebalance_waits_for_the_batch_being_processed() -> None:
    """faust's `wait_empty` waits while `_unacked_messages` is not empty."""
    consumer = Consumer()
    release = asyncio.Event()
    tracked_during: list[bool] = []

    async def slow(tp: TP, messages: Sequence[Message], progress: BatchProgress) -> None:
        for _ in messages:
            await release.wait()  # e.g. waiting for room for its outputs
            tracked_during.append(bool(consumer._unacked_messages))
            progress.done += 1

    task = asyncio.ensure_future(_hand(consumer, {EVENTS: [Record(1), Record(2)]}, slow))
    await asyncio.sleep(0)
    assert consumer._unacked_messages, "tracked: a rebalance now waits"
    assert consumer.handing_over, "the offset guard seeks nothing now"
    release.set()
    await task
    assert tracked_during == [True, True]
    assert consumer._unacked_messages == set()
    assert consumer._acked[EVENTS] == [1, 2]


async def test_other_topics_go_one_record_at_a_time_to_faust_s_callback() -> None:
    consumer = Consumer()
    changelog = TP("sessions-changelog", 1)
    handed: list[int] = []

    async def callback(message: Message) -> None:
        handed.append(message.offset)

    async def wait_first(hand_off: Any, flow: Any) -> None:
        flow.close()
        await hand_off

    consumer.callback = callback  # type: ignore[attr-defined]
    consumer.wait_first = wait_first  # type: ignore[attr-defined]
    consumer.app.topics = type("Topics", (), {"acks_enabled_for": lambda self, t: False})()  # type: ignore[attr-defined]
    process = Processing(consumer)
    await _hand(consumer, {changelog: [Record(0), Record(1)], EVENTS: [Record(7)]}, process)
    assert handed == [0, 1]
    assert consumer._read_offset[changelog] == 1
    assert [offset for offset, _ in process.seen] == [7]
