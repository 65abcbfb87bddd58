"""`key_partition` places keys as Kafka's default partitioner does: the same murmur2 as
aiokafka's (which the outputs used before) and the Java client's, for every length."""

from __future__ import annotations

import faust
import pytest
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given
from hypothesis import strategies as st

from loopwatch.streams.kafka.key_partition import key_partition, murmur2


@given(st.binary(max_size=300))
def test_murmur2_equals_aiokafkas(data: bytes) -> None:
    assert murmur2(data) == aiokafka_murmur2(data)


@given(st.binary(min_size=1, max_size=80), st.integers(min_value=1, max_value=64))
def test_partition_equals_the_default_partitioners(key: bytes, partitions: int) -> None:
    everyone = list(range(partitions))
    assert key_partition(key, partitions) == DefaultPartitioner()(key, everyone, everyone)


@pytest.mark.parametrize(
    ("data", "signed"),
    [  # org.apache.kafka.common.utils.UtilsTest.testMurmur2
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_equals_the_java_clients(data: bytes, signed: int) -> None:
    assert murmur2(data) == signed & 0xFFFFFFFF


async def test_the_workers_producer_places_keys_with_the_default_partitioner() -> None:
    """The outputs place keys themselves only where the producer would place them the
    same way (`default_partition_count`); faust's aiokafka producer, with the worker's
    settings (no `producer_partitioner`), does."""
    app = faust.App("key-partition-test", broker="kafka://127.0.0.1:1")
    producer = app.producer._new_producer()
    try:
        assert isinstance(producer._partitioner, DefaultPartitioner)
        assert producer.client.cluster is producer._metadata
    finally:
        await producer.stop()
