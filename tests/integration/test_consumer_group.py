"""Consumer groups on the local broker form promptly and share partitions."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from loopwatch.streams.kafka.admin import TopicSpec, ensure_topics

pytestmark = pytest.mark.kafka

# generous: a deadline for a failure to show, not a performance bound
JOIN_DEADLINE_SECONDS = 30


class Assignments:
    """The latest assignment of each consumer, with a way to wait for a condition on them."""

    def __init__(self) -> None:
        self.current: dict[str, set[TopicPartition]] = {}
        self.changed = asyncio.Condition()

    def listener(self, name: str) -> ConsumerRebalanceListener:
        assignments = self

        class One(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
                async with assignments.changed:
                    assignments.current[name] = set()
                    assignments.changed.notify_all()

            async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
                async with assignments.changed:
                    assignments.current[name] = set(assigned)
                    assignments.changed.notify_all()

        return One()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(JOIN_DEADLINE_SECONDS), self.changed:
            await self.changed.wait_for(predicate)


async def test_group_joins_and_rebalances_promptly(
    kafka_bootstrap: str, kafka_admin: AIOKafkaAdminClient, topic_name: str, group_id: str
) -> None:
    await ensure_topics(kafka_admin, [TopicSpec(topic_name, 4, 1)])
    every = {TopicPartition(topic_name, p) for p in range(4)}
    assignments = Assignments()

    def consumer(name: str) -> AIOKafkaConsumer:
        c = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group_id)
        c.subscribe([topic_name], listener=assignments.listener(name))
        return c

    first = consumer("first")
    await first.start()
    second = consumer("second")
    try:
        await assignments.wait_for(lambda: assignments.current.get("first") == every)

        await second.start()
        await assignments.wait_for(
            lambda: (
                bool(assignments.current.get("first"))
                and bool(assignments.current.get("second"))
                and assignments.current["first"] | assignments.current["second"] == every
            )
        )
        assert not assignments.current["first"] & assignments.current["second"]
    finally:
        await second.stop()
        await first.stop()
