"""`streams.kafka.faust_ext.resume_wake`: with no partition active (the moment between the
end of a recovery and the stream partitions' resumption), the fetch loop goes on as soon
as a partition is resumed or assigned, where faust's loop slept a whole second first
(the first events after a restore waited for it: docs/performance.md §4)."""

from __future__ import annotations

import asyncio
from typing import Any

from faust.types import TP

from loopwatch.streams.kafka.faust_ext.offset_guard import GuardedConsumer
from loopwatch.streams.worker.app import create_app
from tests.stream.settings_for_tests import stream_settings

EVENTS = TP("lw-agent-events", 0)
DEADLINE_SECONDS = 30.0
"""Far above faust's one-second sleep: the wait below ends by the resume or not at all."""


class FetchLog:
    """Stands in for the consumer's fetch (`_getmany`): what it was asked, and records."""

    def __init__(self) -> None:
        self.asked: list[set[Any]] = []
        self.records = {EVENTS: ["a record"]}

    async def __call__(self, *, active_partitions: set[Any], timeout: float) -> dict[Any, Any]:
        self.asked.append(set(active_partitions))
        return self.records


def idle_consumer() -> tuple[GuardedConsumer, FetchLog]:
    """The worker's consumer with no partition active and its flow running."""
    consumer = create_app(stream_settings()).consumer
    assert isinstance(consumer, GuardedConsumer)
    consumer.flow_active = True
    consumer._set_active_tps(set())
    fetch = FetchLog()
    consumer._getmany = fetch  # type: ignore[method-assign]
    return consumer, fetch


async def waiting(consumer: GuardedConsumer) -> asyncio.Task[Any]:
    """`_wait_next_records` started, once it waits for a partition (a few loop turns)."""
    task = asyncio.create_task(consumer._wait_next_records(DEADLINE_SECONDS))
    async with asyncio.timeout(DEADLINE_SECONDS):
        while consumer._resumed is None:
            await asyncio.sleep(0)
    assert not task.done()
    return task


async def test_a_resumed_partition_is_fetched_at_once() -> None:
    consumer, fetch = idle_consumer()
    task = await waiting(consumer)
    consumer.resume_partitions({EVENTS})
    async with asyncio.timeout(DEADLINE_SECONDS):
        records, active = await task
    assert records == {EVENTS: ["a record"]}  # fetched in the same call, not a second later
    assert fetch.asked == [{EVENTS}]
    assert active == {EVENTS}


async def test_an_assignment_wakes_it_too() -> None:
    consumer, fetch = idle_consumer()
    task = await waiting(consumer)
    consumer._set_active_tps({EVENTS})
    async with asyncio.timeout(DEADLINE_SECONDS):
        records, _ = await task
    assert records == {EVENTS: ["a record"]}
    assert fetch.asked == [{EVENTS}]


async def test_with_no_partition_it_waits_out_its_timeout_and_fetches_nothing() -> None:
    consumer, fetch = idle_consumer()
    async with asyncio.timeout(DEADLINE_SECONDS):
        records, active = await consumer._wait_next_records(0.01)
    assert (records, active) == ({}, set())
    assert fetch.asked == []
    assert consumer._resumed is None


async def test_a_stopping_consumer_ends_the_wait() -> None:
    consumer, fetch = idle_consumer()
    task = await waiting(consumer)
    consumer._stopped.set()
    async with asyncio.timeout(DEADLINE_SECONDS):
        records, _ = await task
    assert records == {}
    assert fetch.asked == []
