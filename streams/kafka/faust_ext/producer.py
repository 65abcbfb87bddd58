"""aiokafka producer internals the batched outputs (`streams.kafka.outputs`) need to build one
closed batch per partition themselves."""

from __future__ import annotations

from typing import Any

from aiokafka.partitioner import DefaultPartitioner


async def wait_on_metadata(producer: Any, topic: str) -> None:
    """Wait until the producer knows `topic`'s partitions."""
    await producer.client._wait_on_metadata(topic)


def default_partition(producer: Any, topic: str, key: bytes | None, value: bytes | None) -> int:
    """The partition Kafka's default partitioner (the producer's) gives `key`."""
    partition: int = producer._partition(topic, None, None, None, key, value)
    return partition


async def partition_count(producer: Any, topic: str) -> int:
    """How many partitions `topic` has, from the producer's metadata (fetched if needed)."""
    await wait_on_metadata(producer, topic)
    return _known_partitions(producer, topic)


def default_partition_count(producer: Any, topic: str) -> int | None:
    """`topic`'s partition count when `producer` places keys with Kafka's default
    partitioner (`streams.kafka.key_partition` then gives the same partitions without
    asking it); None with another partitioner or before its metadata is known."""
    if not isinstance(getattr(producer, "_partitioner", None), DefaultPartitioner):
        return None
    return _known_partitions(producer, topic) or None


def _known_partitions(producer: Any, topic: str) -> int:
    """`topic`'s partition count in the producer's metadata (0: not known yet)."""
    return len(producer.client.cluster.partitions_for_topic(topic) or ())
