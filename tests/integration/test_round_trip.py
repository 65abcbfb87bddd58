"""Records survive a trip through the real broker: keys, values, headers, per-key order."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from loopwatch.streams.kafka.admin import TopicSpec, ensure_topics

pytestmark = pytest.mark.kafka

DEADLINE_SECONDS = 30


async def test_produce_and_consume_round_trip(
    kafka_bootstrap: str, kafka_admin: AIOKafkaAdminClient, topic_name: str, group_id: str
) -> None:
    await ensure_topics(kafka_admin, [TopicSpec(topic_name, 3, 1)])
    sent = [
        (f"session-{i % 4}".encode(), f"event-{i}".encode(), [("error", f"E{i}".encode())])
        for i in range(24)
    ]
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        partitions = {}
        for key, value, headers in sent:
            meta = await producer.send_and_wait(topic_name, value, key=key, headers=headers)
            partitions.setdefault(key, set()).add(meta.partition)
    finally:
        await producer.stop()
    # keyed by session: every record of a session lands on one partition
    assert all(len(p) == 1 for p in partitions.values())

    consumer = AIOKafkaConsumer(
        topic_name,
        bootstrap_servers=kafka_bootstrap,
        group_id=group_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    received = []
    try:
        async with asyncio.timeout(DEADLINE_SECONDS):
            while len(received) < len(sent):
                batches = await consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    received.extend(records)
    finally:
        await consumer.stop()

    assert len(received) == len(sent)
    for key in partitions:
        # order within a key is the order sent
        assert [r.value for r in received if r.key == key] == [v for k, v, _ in sent if k == key]
    by_value = {r.value: r for r in received}
    for key, value, headers in sent:
        assert by_value[value].key == key
        assert list(by_value[value].headers) == headers
        assert by_value[value].partition in partitions[key]
