"""`index_changelog_records` (a recovery's batch, the touches of each partition's run in
one `ExpiryIndex.touch_all`) builds the index that `index_changelog_record` per record
builds: the same deadlines, heaps, clocks and peaks, tombstones and unreadable values
in their places, over enough touches that the heap is rebuilt along the way."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

import pytest

from loopwatch.streams.kafka.expiry import (
    ExpiryIndex,
    index_changelog_record,
    index_changelog_records,
)


@dataclass
class Message:
    partition: int
    key: bytes | None
    value: bytes | None


def times(value: bytes) -> tuple[float, bool, float | None]:
    """A stand-in record: b"seen,ended,wall" (wall "-": none); anything else raises."""
    seen, ended, wall = value.decode().split(",")
    return float(seen), ended == "1", None if wall == "-" else float(wall)


def changelog(seed: int, count: int) -> list[Message]:
    rng = random.Random(seed)
    messages = []
    for n in range(count):
        key = None if rng.random() < 0.01 else b"s%d" % rng.randrange(300)
        roll = rng.random()
        if roll < 0.1:
            value = None
        elif roll < 0.13:
            value = b"not a record"
        else:
            wall = "-" if rng.random() < 0.3 else str(1000.0 + n + rng.random())
            value = f"{900.0 + n * rng.random()},{int(rng.random() < 0.2)},{wall}".encode()
        messages.append(Message(rng.choice((0, 0, 1, 2)), key, value))
    return messages


def state(index: ExpiryIndex) -> dict[int, tuple[object, ...]]:
    return {
        partition: (part.deadlines, part.heap, part.waiting, part.clock, part.peak)
        for partition, part in index._partitions.items()
    }


@pytest.mark.parametrize("seed", range(5))
def test_a_batch_builds_the_index_the_records_one_by_one_build(seed: int) -> None:
    messages = changelog(seed, 6000)  # > 2 x 300 + 1024 touches: heaps rebuilt
    one_by_one = ExpiryIndex(timedelta(seconds=60), timedelta(seconds=5))

    def touch(partition: int, session_id: str, stored: tuple[float, bool, float | None]) -> None:
        last, ended, wall = stored
        one_by_one.touch_at(partition, session_id, last, ended=ended, wall=wall)

    for message in messages:
        index_changelog_record(one_by_one, message, times, touch)
    batched = ExpiryIndex(timedelta(seconds=60), timedelta(seconds=5))
    for start in range(0, len(messages), 700):
        index_changelog_records(batched, messages[start : start + 700], times)

    assert state(batched) == state(one_by_one)
    assert batched.sessions() == one_by_one.sessions() > 0
