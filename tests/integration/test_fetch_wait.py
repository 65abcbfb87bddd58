"""`streams.kafka.faust_ext.fetch_wait` against the real broker: what each fetch asks for.

The fetches aiokafka sends are recorded as they go (its client's `send`), so the test
sees the requests themselves: a fetch after one that brought records waits for a few
more; one after an empty fetch goes back to the long poll."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.fetch import FetchRequest

from loopwatch.streams.kafka.admin import TopicSpec, ensure_topics
from loopwatch.streams.kafka.faust_ext.fetch_wait import (
    BUSY_MIN_BYTES,
    AdaptiveFetcher,
    adapt_fetch_wait,
)
from loopwatch.streams.settings import Settings
from loopwatch.streams.worker.app import create_app

pytestmark = pytest.mark.kafka

DEADLINE_SECONDS = 30
LONG_POLL_MS = 200
"""The consumer's own fetch wait (the idle request): short, so the test does not wait
long for the empty fetch that follows the busy one."""
BUSY_WAIT_MS = 25


class FetchLog:
    """The (min bytes, max wait ms) of each fetch request a consumer sends, in order."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.requests: list[tuple[int, int]] = []
        self._grew = asyncio.Event()
        client = consumer._client
        send = client.send

        async def recording_send(node_id: int, request: Any, **kwargs: Any) -> Any:
            if isinstance(request, FetchRequest):
                self.requests.append((request._min_bytes, request._max_wait_ms))
                self._grew.set()
            return await send(node_id, request, **kwargs)

        client.send = recording_send

    async def wait_until(self, done: Callable[[list[tuple[int, int]]], bool]) -> None:
        async with asyncio.timeout(DEADLINE_SECONDS):
            while not done(self.requests):
                self._grew.clear()
                await self._grew.wait()


async def _produce_one(bootstrap: str, tp: TopicPartition) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(tp.topic, b"one event", partition=tp.partition)
    finally:
        await producer.stop()


async def _next_values(consumer: AIOKafkaConsumer) -> list[bytes | None]:
    # `getmany` as faust reads: it takes the partition's whole fetch, so the fetcher
    # sends the next request (`getone` leaves the emptied fetch until its next call)
    async with asyncio.timeout(DEADLINE_SECONDS):
        while not (batch := await consumer.getmany(timeout_ms=1000)):
            pass
    return [record.value for records in batch.values() for record in records]


@pytest.fixture
async def one_partition(kafka_admin: AIOKafkaAdminClient, topic_name: str) -> TopicPartition:
    await ensure_topics(kafka_admin, [TopicSpec(topic_name, 1, 1, {})])
    return TopicPartition(topic_name, 0)


@pytest.fixture
async def consumer(kafka_bootstrap: str) -> AsyncIterator[AIOKafkaConsumer]:
    started = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=LONG_POLL_MS,
    )
    await started.start()
    try:
        yield started
    finally:
        await started.stop()


async def test_after_a_fetch_with_records_the_next_waits_then_an_empty_one_long_polls_again(
    kafka_bootstrap: str, consumer: AIOKafkaConsumer, one_partition: TopicPartition
) -> None:
    adapt_fetch_wait(consumer, BUSY_WAIT_MS)
    fetches = FetchLog(consumer)
    idle, busy = (1, LONG_POLL_MS), (BUSY_MIN_BYTES, BUSY_WAIT_MS)
    consumer.assign([one_partition])
    await fetches.wait_until(lambda requests: len(requests) >= 1)
    assert set(fetches.requests) == {idle}  # nothing fetched yet: the long poll

    await _produce_one(kafka_bootstrap, one_partition)
    assert await _next_values(consumer) == [b"one event"]

    # the fetch after the one that brought the record waits for more; it comes back
    # empty (nothing else was produced), so the one after it long-polls again
    await fetches.wait_until(lambda requests: busy in requests and requests[-1] != busy)
    first_busy = fetches.requests.index(busy)
    assert set(fetches.requests[:first_busy]) == {idle}
    assert fetches.requests[first_busy + 1 :] == [idle] * (len(fetches.requests) - first_busy - 1)


async def test_with_no_wait_every_fetch_long_polls(
    kafka_bootstrap: str, consumer: AIOKafkaConsumer, one_partition: TopicPartition
) -> None:
    adapt_fetch_wait(consumer, 0)
    fetches = FetchLog(consumer)
    consumer.assign([one_partition])
    await _produce_one(kafka_bootstrap, one_partition)
    assert await _next_values(consumer) == [b"one event"]
    count = len(fetches.requests)
    await fetches.wait_until(lambda requests: len(requests) > count)  # the one after it
    assert set(fetches.requests) == {(1, LONG_POLL_MS)}
    assert not isinstance(consumer._fetcher, AdaptiveFetcher)


@pytest.mark.parametrize("fetch_wait_ms", [0, 2, 9])
async def test_the_workers_consumer_fetches_with_the_settings_wait(
    kafka_settings: Settings, fetch_wait_ms: int
) -> None:
    app = create_app(kafka_settings.model_copy(update={"fetch_wait_ms": fetch_wait_ms}))
    thread = app.consumer._thread
    await thread.on_start()  # creates and starts aiokafka's consumer on this loop
    try:
        fetcher = thread._consumer._fetcher
        assert isinstance(fetcher, AdaptiveFetcher) == (fetch_wait_ms > 0)  # 0: aiokafka's
        assert getattr(fetcher, "busy_wait_ms", 0) == fetch_wait_ms
    finally:
        await thread._consumer.stop()
