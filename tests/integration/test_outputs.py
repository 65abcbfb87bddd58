"""`BatchedOutputs` against the real broker: partitions, order, offsets, changelog, failure.

Each test produces through a plain `AIOKafkaProducer` (acks=all) and reads the topic back
with a consumer up to its end offsets, so a lost, duplicated or misplaced record shows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from loopwatch.streams.client.reader import partition_for
from loopwatch.streams.kafka.admin import TopicSpec, ensure_topics
from loopwatch.streams.kafka.batched_outputs import BATCH_RECORDS, BatchedOutputs
from loopwatch.streams.kafka.outputs import OnDelivered, OutputFailed

pytestmark = pytest.mark.kafka

DEADLINE_SECONDS = 30
PARTITIONS = 3
LONG_LINGER = 3600.0
"""A linger no test outlives: records sent anyway were sent for another reason."""


@dataclass
class Calls:
    """What `BatchedOutputs` reported through its callbacks."""

    failures: list[BaseException] = field(default_factory=list)
    batches: list[tuple[str, int, int]] = field(default_factory=list)

    def on_failure(self, exc: BaseException) -> None:
        self.failures.append(exc)

    def on_delivered_batch(self, topic: str, partition: int, last_offset: int) -> None:
        self.batches.append((topic, partition, last_offset))


@pytest.fixture
async def producer(kafka_bootstrap: str) -> AsyncIterator[AIOKafkaProducer]:
    started = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await started.start()
    try:
        yield started
    finally:
        await started.stop()  # a second stop (a test stopped it) does nothing


@pytest.fixture
async def topic(kafka_admin: AIOKafkaAdminClient, topic_name: str) -> str:
    """A topic of this test alone, with `PARTITIONS` partitions."""
    return await make_topic(kafka_admin, topic_name)


@pytest.fixture
def calls() -> Calls:
    return Calls()


def outputs_for(producer: AIOKafkaProducer, calls: Calls, **options: Any) -> BatchedOutputs:
    """Outputs with a fixed linger unless `send_when_idle=True` is passed: most tests
    control when drains happen through the linger and the count."""
    return BatchedOutputs(
        lambda: producer,
        on_failure=calls.on_failure,
        on_delivered_batch=calls.on_delivered_batch,
        **{"send_when_idle": False, **options},
    )


async def make_topic(
    admin: AIOKafkaAdminClient,
    name: str,
    partitions: int = PARTITIONS,
    configs: Mapping[str, str] | None = None,
) -> str:
    await ensure_topics(admin, [TopicSpec(name, partitions, 1, dict(configs or {}))])
    return name


async def read_to_end(
    bootstrap: str, topic: str, partitions: int = PARTITIONS
) -> list[ConsumerRecord]:
    """Every record of `topic`, from the beginning to the end offsets as of now."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        received: list[ConsumerRecord] = []
        async with asyncio.timeout(DEADLINE_SECONDS):
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                batches = await consumer.getmany(*tps, timeout_ms=1000)
                for records in batches.values():
                    received.extend(records)
        return received
    finally:
        await consumer.stop()


def delivered_future() -> tuple[asyncio.Future[int], OnDelivered]:
    """A future set with the offset `on_delivered` gets (it must be called only once)."""
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    return future, future.set_result


async def all_delivered(futures: Iterable[asyncio.Future[int]]) -> list[int]:
    async with asyncio.timeout(DEADLINE_SECONDS):
        return list(await asyncio.gather(*futures))


def by_partition(records: Iterable[ConsumerRecord]) -> dict[int, list[ConsumerRecord]]:
    split: dict[int, list[ConsumerRecord]] = {}
    for record in records:
        split.setdefault(record.partition, []).append(record)
    return split


async def test_keyed_records_land_on_the_default_partition_in_order_with_their_offsets(
    kafka_bootstrap: str,
    topic: str,
    producer: AIOKafkaProducer,
    calls: Calls,
) -> None:
    outputs = outputs_for(producer, calls)
    sent: list[tuple[bytes, bytes, list[tuple[str, bytes]]]] = []
    offsets: list[asyncio.Future[int]] = []
    for i in range(300):
        session = f"session-{i % 37}"
        headers = [] if i % 5 == 0 else [("kind", b"verdict"), ("n", str(i).encode())]
        sent.append((session.encode(), f"value-{i}".encode(), headers))
        future, on_delivered = delivered_future()
        offsets.append(future)
        await outputs.send(
            topic, sent[-1][0], sent[-1][1], headers=headers or None, on_delivered=on_delivered
        )
    await outputs.flush()

    assert all(future.done() for future in offsets)  # flush returned after every ack
    received = await read_to_end(kafka_bootstrap, topic)
    assert calls.failures == []
    assert len(received) == len(sent)
    expected_partition = [partition_for(key.decode(), PARTITIONS) for key, _, _ in sent]
    assert len(set(expected_partition)) == PARTITIONS  # the keys spread over every partition
    index_of = {value: i for i, (_, value, _) in enumerate(sent)}
    for record in received:
        i = index_of[record.value]
        key, _, headers = sent[i]
        assert record.key == key
        assert list(record.headers) == headers
        assert record.partition == expected_partition[i]
        assert record.offset == offsets[i].result()
    for partition, records in by_partition(received).items():
        assert [r.value for r in records] == [
            value for i, (_, value, _) in enumerate(sent) if expected_partition[i] == partition
        ]


async def test_changelog_records_go_to_their_partition_with_tombstones(
    kafka_bootstrap: str,
    kafka_admin: AIOKafkaAdminClient,
    topic_name: str,
    producer: AIOKafkaProducer,
    calls: Calls,
) -> None:
    topic = await make_topic(kafka_admin, topic_name, configs={"cleanup.policy": "compact"})
    outputs = outputs_for(producer, calls)
    written: list[tuple[int, bytes, bytes | None]] = []
    for i in range(60):
        key = f"session-{i % 11}".encode()
        # a partition the key does not hash to: the given partition wins, not the key
        partition = (partition_for(key.decode(), PARTITIONS) + 1 + i % 2) % PARTITIONS
        value = None if i % 4 == 3 else f"state-{i}".encode()
        written.append((partition, key, value))
        outputs.add_changelog(topic, partition, key, value)
    await outputs.flush()

    counts = {p: sum(1 for w in written if w[0] == p) for p in range(PARTITIONS)}
    assert all(counts.values())
    # added without a pause: one batch per partition, reporting its last offset
    assert sorted(calls.batches) == [(topic, p, counts[p] - 1) for p in range(PARTITIONS)]

    # a second batch on one partition reports the offset of its own last record
    outputs.add_changelog(topic, 1, b"session-x", b"again")
    outputs.add_changelog(topic, 1, b"session-x", None)
    await outputs.flush()
    assert calls.batches[-1] == (topic, 1, counts[1] + 1)
    written += [(1, b"session-x", b"again"), (1, b"session-x", None)]

    received = await read_to_end(kafka_bootstrap, topic)
    assert calls.failures == []
    split = by_partition(received)
    for partition in range(PARTITIONS):
        assert [(r.key, r.value) for r in split[partition]] == [
            (key, value) for p, key, value in written if p == partition
        ]
        assert [r.offset for r in split[partition]] == list(range(len(split[partition])))
    assert sum(1 for r in received if r.value is None) == sum(1 for w in written if w[2] is None)


MANY = 5000
FILLER = b"x" * 1000


@dataclass(frozen=True)
class Pace:
    options: dict[str, Any]
    yield_every: int | None
    """Yield to the event loop after every this many sends (None: never, one drain)."""


@pytest.mark.parametrize(
    "pace",
    [
        # one drain: each partition's ~1.7 MB split over many 16 KB aiokafka batches
        pytest.param(Pace({"linger": LONG_LINGER}, None), id="one-drain"),
        # the worker yields between events: linger-triggered drains while records arrive
        pytest.param(Pace({"linger": 0.001}, 7), id="linger"),
        # count-triggered drains only (the linger never fires)
        pytest.param(Pace({"linger": LONG_LINGER, "batch_records": 64}, 5), id="batch-records"),
        # the adaptive linger: drains started by idleness and by acknowledgements only
        pytest.param(Pace({"linger": LONG_LINGER, "send_when_idle": True}, 7), id="adaptive"),
    ],
)
async def test_many_records_arrive_once_each_in_order(
    kafka_bootstrap: str, topic: str, producer: AIOKafkaProducer, calls: Calls, pace: Pace
) -> None:
    outputs = outputs_for(producer, calls, **pace.options)
    delivered: dict[int, int] = {}
    calls_of_on_delivered = 0

    def on_delivered_for(i: int) -> OnDelivered:
        def on_delivered(offset: int) -> None:
            nonlocal calls_of_on_delivered
            calls_of_on_delivered += 1
            delivered[i] = offset

        return on_delivered

    keys = [f"session-{i % 251}".encode() for i in range(MANY)]
    for i, key in enumerate(keys):
        await outputs.send(topic, key, b"%06d:" % i + FILLER, on_delivered=on_delivered_for(i))
        if pace.yield_every and i % pace.yield_every == 0:
            await asyncio.sleep(0)  # a yield to the loop, as between two events
    await outputs.flush()

    # every on_delivered ran, once, before flush returned
    assert (len(delivered), calls_of_on_delivered) == (MANY, MANY)
    assert outputs.waiting == 0
    received = await read_to_end(kafka_bootstrap, topic)
    assert calls.failures == []
    assert len(received) == MANY
    indexes = [int(r.value.split(b":", 1)[0]) for r in received]
    assert len(set(indexes)) == MANY  # none twice
    for record, i in zip(received, indexes, strict=True):
        assert record.key == keys[i]
        assert record.partition == partition_for(keys[i].decode(), PARTITIONS)
        assert record.offset == delivered[i]
    for records in by_partition(received).values():
        order = [int(r.value.split(b":", 1)[0]) for r in records]
        assert order == sorted(order)  # the order added
        assert [r.offset for r in records] == list(range(len(records)))
    last: dict[int, int] = {}
    for _topic, partition, offset in calls.batches:
        assert offset > last.get(partition, -1)  # batches acknowledged in order
        last[partition] = offset
    assert last == {p: len(rs) - 1 for p, rs in by_partition(received).items()}


async def test_batch_records_waiting_are_sent_without_linger_or_flush(
    topic: str, producer: AIOKafkaProducer, calls: Calls
) -> None:
    outputs = outputs_for(producer, calls, linger=LONG_LINGER, batch_records=50)
    futures = []
    for i in range(50):
        future, on_delivered = delivered_future()
        futures.append(future)
        await outputs.send(topic, b"k%d" % i, b"v", on_delivered=on_delivered)

    await all_delivered(futures)  # no flush, and the linger is an hour
    assert outputs.waiting == 0
    assert calls.failures == []


async def test_lingering_records_are_sent_without_flush(
    topic: str, producer: AIOKafkaProducer, calls: Calls
) -> None:
    outputs = outputs_for(producer, calls, linger=0.005, batch_records=BATCH_RECORDS)
    futures = []
    for i in range(5):
        future, on_delivered = delivered_future()
        futures.append(future)
        await outputs.send(topic, b"k%d" % i, b"v", on_delivered=on_delivered)
    assert outputs.waiting == 5

    await all_delivered(futures)
    assert outputs.waiting == 0
    assert calls.failures == []


async def test_adaptive_records_go_when_idle_and_on_acknowledgement_without_linger(
    topic: str, producer: AIOKafkaProducer, calls: Calls
) -> None:
    outputs = outputs_for(producer, calls, linger=LONG_LINGER, send_when_idle=True)
    first, on_first = delivered_future()
    await outputs.send(topic, b"k0", b"alone", on_delivered=on_first)
    assert outputs.waiting == 1  # goes at the end of this event-loop turn
    await all_delivered([first])  # nothing was in flight; the linger is an hour, no flush
    # Sent as a burst with a yield after each: the first drain takes one, the others
    # wait for its acknowledgement (or go when nothing is in flight any more).
    futures = [first]
    for i in range(1, 20):
        future, on_delivered = delivered_future()
        futures.append(future)
        await outputs.send(topic, b"k%d" % i, b"v", on_delivered=on_delivered)
        await asyncio.sleep(0)  # a yield to the loop, as between two events
    await all_delivered(futures)
    assert outputs.waiting == 0
    assert calls.failures == []


async def test_a_stopped_producer_fails_flush_and_calls_on_failure_once(
    topic: str, producer: AIOKafkaProducer, calls: Calls
) -> None:
    outputs = outputs_for(producer, calls)
    await outputs.send(topic, b"before", b"stored")
    await outputs.flush()
    assert calls.failures == []

    await producer.stop()
    lost: list[int] = []
    await outputs.send(topic, b"after", b"lost", on_delivered=lost.append)
    with pytest.raises(OutputFailed):
        await outputs.flush()
    assert len(calls.failures) == 1
    assert isinstance(calls.failures[0], KafkaError)

    # failed for good: every later flush refuses too, without a second on_failure
    await outputs.send(topic, b"later", b"lost too", on_delivered=lost.append)
    with pytest.raises(OutputFailed):
        await outputs.flush()
    assert len(calls.failures) == 1
    assert lost == []


async def test_a_batch_the_broker_refuses_fails_flush_and_calls_on_failure_once(
    kafka_bootstrap: str,
    kafka_admin: AIOKafkaAdminClient,
    topic_name: str,
    producer: AIOKafkaProducer,
    calls: Calls,
) -> None:
    topic = await make_topic(
        kafka_admin, topic_name, partitions=1, configs={"max.message.bytes": "4096"}
    )
    outputs = outputs_for(producer, calls)
    delivered: list[int] = []
    await outputs.send(topic, b"small", b"fits", on_delivered=delivered.append)
    await outputs.flush()
    assert delivered == [0]

    for i in range(3):  # three records of 3 KB: one batch of 9 KB, over the topic's limit
        await outputs.send(topic, b"big", b"%d" % i * 3000, on_delivered=delivered.append)
    with pytest.raises(OutputFailed):
        await outputs.flush()

    assert len(calls.failures) == 1
    assert isinstance(calls.failures[0], MessageSizeTooLargeError)
    assert delivered == [0]
    assert calls.batches == [(topic, 0, 0)]
    assert [r.value for r in await read_to_end(kafka_bootstrap, topic, partitions=1)] == [b"fits"]


async def test_send_waits_when_max_waiting_records_are_waiting(
    kafka_bootstrap: str,
    topic: str,
    producer: AIOKafkaProducer,
    calls: Calls,
) -> None:
    # neither the linger nor the count trigger sends: only the back-pressure in send
    outputs = outputs_for(
        producer, calls, linger=LONG_LINGER, batch_records=BATCH_RECORDS, max_waiting=10
    )
    futures = []
    waiting_after = []
    for i in range(100):
        future, on_delivered = delivered_future()
        futures.append(future)
        await outputs.send(topic, b"k%d" % (i % 7), b"%03d" % i, on_delivered=on_delivered)
        waiting_after.append(outputs.waiting)

    assert max(waiting_after) <= 10
    # the tenth record waiting made send hand all ten to aiokafka before returning
    assert waiting_after == [(i + 1) % 10 for i in range(100)]
    await all_delivered(futures)  # delivered without a flush
    await outputs.flush()

    received = await read_to_end(kafka_bootstrap, topic)
    assert calls.failures == []
    assert sorted(r.value for r in received) == [b"%03d" % i for i in range(100)]
    for records in by_partition(received).values():
        values = [r.value for r in records]
        assert values == sorted(values)


async def test_a_cancelled_flush_loses_no_records(
    kafka_admin: AIOKafkaAdminClient, topic_name: str, producer: AIOKafkaProducer
) -> None:
    # a commit (its flush) cancelled as the worker stops or a rebalance starts
    topic = await make_topic(kafka_admin, topic_name, partitions=1)
    first_ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    calls = Calls()

    def on_delivered_batch(topic: str, partition: int, last_offset: int) -> None:
        calls.on_delivered_batch(topic, partition, last_offset)
        if not first_ack.done():
            first_ack.set_result(None)

    outputs = BatchedOutputs(
        lambda: producer,
        on_failure=calls.on_failure,
        on_delivered_batch=on_delivered_batch,
        linger=LONG_LINGER,
    )
    delivered: list[int] = []
    for i in range(MANY):  # ~5 MB: about 300 aiokafka batches, submitted one by one
        await outputs.send(topic, b"k", b"%06d:" % i + FILLER, on_delivered=delivered.append)
    flush = asyncio.ensure_future(outputs.flush())
    async with asyncio.timeout(DEADLINE_SECONDS):
        await first_ack  # the drain is under way: most batches are not submitted yet
    assert not flush.done()
    flush.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flush

    async with asyncio.timeout(DEADLINE_SECONDS):
        await outputs.flush()  # the next commit's flush
    assert calls.failures == []
    assert delivered == list(range(MANY))


async def test_adaptive_records_wait_for_the_linger_while_input_is_queued(
    topic: str, producer: AIOKafkaProducer, calls: Calls
) -> None:
    """A backlog (the stream has records queued): neither idleness nor an acknowledgement
    sends what waits; the event that finds the input empty sends it all at once."""
    queued = False
    outputs = outputs_for(
        producer, calls, linger=LONG_LINGER, send_when_idle=True, input_waiting=lambda: queued
    )
    known, on_known = delivered_future()
    await outputs.send(topic, b"k", b"metadata", on_delivered=on_known)
    await all_delivered([known])  # the producer knows the topic now: drains never wait
    first, on_first = delivered_future()
    await outputs.send(topic, b"k0", b"alone", on_delivered=on_first)
    while outputs.waiting:
        await asyncio.sleep(0)  # handed to aiokafka, in flight
    queued = True
    futures = []
    for i in range(1, 6):
        future, on_delivered = delivered_future()
        futures.append(future)
        await outputs.send(topic, b"k%d" % i, b"v", on_delivered=on_delivered)
        await asyncio.sleep(0)  # a yield to the loop, as between two events
    await all_delivered([first])
    for _ in range(5):
        await asyncio.sleep(0)  # turns in which an acknowledgement-started drain would run
    assert outputs.waiting == 5
    assert not any(future.done() for future in futures)

    queued = False  # the next event is the last one queued
    last, on_last = delivered_future()
    await outputs.send(topic, b"k6", b"v", on_delivered=on_last)
    await all_delivered([*futures, last])  # the linger is an hour, no flush
    assert outputs.waiting == 0
    assert calls.failures == []
