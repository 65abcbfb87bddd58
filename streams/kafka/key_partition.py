"""Kafka's default partitioner for a keyed record, without aiokafka's per-byte loop.

The outputs place every verdict, episode and changelog record by its key before they
batch it (`batched_outputs`); with events spread over many sessions nearly every key is
new to the cache there, and aiokafka's pure-Python murmur2 reads the key byte by byte
(~4.7 us for a 34-byte session id). This one reads it four bytes at a time (~2.3 us)
and gives the same partitions: tests/unit/kafka/test_key_partition.py holds it to
aiokafka's function and to the Java client's test vectors.
"""

from __future__ import annotations

import struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = [struct.Struct(f"<{n}I") for n in range(64)]
"""Little-endian unsigned 32-bit word readers by count (longer keys build theirs)."""


def murmur2(data: bytes) -> int:
    """MurmurHash2 as Kafka computes it (`org.apache.kafka.common.utils.Utils.murmur2`),
    unsigned 32-bit."""
    length = len(data)
    count = length >> 2
    words = _WORDS[count] if count < len(_WORDS) else struct.Struct(f"<{count}I")
    h = _SEED ^ length
    for word in words.unpack_from(data):
        k = (word * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = length & 3
    if tail:
        end = length & ~3
        if tail == 3:
            h ^= data[end + 2] << 16
        if tail >= 2:
            h ^= data[end + 1] << 8
        h = ((h ^ data[end]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def key_partition(key: bytes, partitions: int) -> int:
    """The partition of `partitions` Kafka's default partitioner gives `key`."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
