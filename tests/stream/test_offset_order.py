"""The offset guard against faust dropping records (streams.kafka.faust_ext.offset_guard),
driven with a stand-in for the few bookkeeping fields of faust's consumer that it reads."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from faust.types import TP
from intervaltree import IntervalTree

from loopwatch.streams.kafka.faust_ext.offset_guard import missing_head
from loopwatch.streams.kafka.faust_ext.offset_order import MAX_SEEKS_PER_GAP, OffsetOrder

EVENTS = TP("events", 0)


class ConsumerBooks:
    """faust's consumer bookkeeping: committed offsets, acked offsets, known gaps."""

    def __init__(
        self, committed: int | None, position: int | None = None, log_start: int = 0
    ) -> None:
        # faust keeps no entry for a partition that has no committed offset
        self._committed_offset: dict[Any, int | None] = {}
        # what the guarded consumer's seek to the committed offsets records
        self.stream_starts: dict[Any, int] = {}
        if committed is not None:
            self._committed_offset[EVENTS] = committed
        else:
            self.stream_starts[EVENTS] = log_start
        self._acked: dict[Any, list[int]] = defaultdict(list)
        self._gap: dict[Any, IntervalTree] = defaultdict(IntervalTree)
        self.positions = {EVENTS: position}
        self.seeks: list[tuple[Any, int]] = []

    def assignment(self) -> set[Any]:
        return {EVENTS}

    async def position(self, tp: Any) -> int | None:
        return self.positions[tp]

    async def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))


class App:
    def __init__(self, consumer: ConsumerBooks) -> None:
        self.consumer = consumer
        self.rebalancing = False


def guard(
    committed: int | None, position: int | None = None, log_start: int = 0
) -> tuple[OffsetOrder, ConsumerBooks]:
    consumer = ConsumerBooks(committed, position, log_start)
    return OffsetOrder(App(consumer)), consumer


def feed(order: OffsetOrder, offsets: list[int]) -> list[int]:
    done = []
    for offset in offsets:
        if order.check(EVENTS, offset):
            order.processed(EVENTS, offset)
            done.append(offset)
    return done


async def test_records_in_order_are_processed_and_nothing_is_sought() -> None:
    order, consumer = guard(committed=5, position=8)
    assert feed(order, [5, 6, 7]) == [5, 6, 7]
    await order.heal("events")
    await order.heal("events")
    assert consumer.seeks == []


async def test_a_record_past_a_dropped_one_is_held_back_until_the_partition_is_reread() -> None:
    order, consumer = guard(committed=5, position=7)
    assert feed(order, [6]) == []  # 5 was dropped by the consumer: 6 must wait
    await order.heal("events")
    assert consumer.seeks == [(EVENTS, 5)]
    assert feed(order, [6, 5, 6]) == [5, 6]  # a stale 6, then the re-read 5 and 6


async def test_a_gap_is_re_read_only_outside_a_record_s_hand_off() -> None:
    # records are processed inside the consumer's hand-off: a seek made while one waits
    # there would race with the fetch loop's read-offset bookkeeping
    order, consumer = guard(committed=5, position=7)
    assert feed(order, [6]) == []
    order.busy = True
    await order.heal("events")
    assert consumer.seeks == []
    order.busy = False
    await order.heal("events")
    assert consumer.seeks == [(EVENTS, 5)]


async def test_gaps_faust_knows_of_pass_at_once() -> None:
    order, consumer = guard(committed=5)
    consumer._gap[EVENTS].addi(6, 7)  # a transaction marker at 6
    assert feed(order, [5, 7]) == [5, 7]


async def test_a_gap_that_stays_is_accepted_after_the_re_reads() -> None:
    order, consumer = guard(committed=5, position=9)
    assert feed(order, [9]) == []  # 5..8 gone (retention)
    for _ in range(MAX_SEEKS_PER_GAP):
        await order.heal("events")
        assert feed(order, [9]) == []
    assert consumer.seeks == [(EVENTS, 5)] * MAX_SEEKS_PER_GAP
    await order.heal("events")
    assert consumer._gap[EVENTS].overlaps(5) and consumer._gap[EVENTS].overlaps(8)
    assert feed(order, [9]) == [9]


async def test_records_fetched_but_dropped_at_the_end_are_reread_after_two_checks() -> None:
    order, consumer = guard(committed=5, position=7)  # 5 and 6 fetched, neither processed
    await order.heal("events")
    assert consumer.seeks == []  # maybe just in flight
    await order.heal("events")
    assert consumer.seeks == [(EVENTS, 5)]


async def test_no_stall_while_the_agent_waits_inside_an_event() -> None:
    # e.g. for room for its records: nothing moves then, and nothing was dropped
    order, consumer = guard(committed=5, position=7)
    order.busy = True
    await order.heal("events")
    await order.heal("events")
    assert consumer.seeks == []
    order.busy = False  # still nothing processed after it: now it is a stall
    await order.heal("events")
    await order.heal("events")
    assert consumer.seeks == [(EVENTS, 5)]


async def test_no_healing_during_a_rebalance() -> None:
    order, consumer = guard(committed=5, position=7)
    order._app.rebalancing = True
    await order.heal("events")
    await order.heal("events")
    assert consumer.seeks == []


def test_commits_never_pass_an_offset_that_was_not_acked() -> None:
    consumer = ConsumerBooks(committed=5)
    consumer._acked[EVENTS] = [6, 7]
    assert missing_head(consumer, EVENTS) == 5
    consumer._acked[EVENTS] = [5, 6]
    assert missing_head(consumer, EVENTS) is None
    consumer._acked[EVENTS] = [7]
    consumer._gap[EVENTS].addi(5, 7)
    assert missing_head(consumer, EVENTS) is None


async def test_a_never_committed_partition_whose_fetched_records_vanished_is_reread() -> None:
    # A worker killed before its first commit: the restarted one has no committed offset
    # for the partition, and records fetched before recovery were dropped unprocessed.
    order, consumer = guard(committed=None, position=7, log_start=2)
    await order.heal("events")
    assert consumer.seeks == []  # maybe just in flight
    await order.heal("events")
    assert consumer.seeks == [(EVENTS, 2)]  # from the log start, as auto_offset_reset says


async def test_a_never_committed_partition_that_makes_progress_is_left_alone() -> None:
    order, consumer = guard(committed=None, position=3, log_start=0)
    await order.heal("events")
    assert feed(order, [0, 1, 2]) == [0, 1, 2]
    await order.heal("events")
    await order.heal("events")
    assert consumer.seeks == []
