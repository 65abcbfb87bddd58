"""Partition lag and stalled partitions of the events topic, for `/metrics`.

Lag of a partition = its high watermark (as of the consumer's latest fetch) minus the next
offset the worker will process. A partition is stalled when it has lag and the next offset
to process has not moved for `STALL_SECONDS` (worker clock: this is about the worker, not
about event time). Updated by a timer; the gauges of partitions no longer assigned go.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from loopwatch.streams.worker.metrics import Metrics

STALL_SECONDS = 30.0
"""No progress for this long with events waiting: stalled (far above a commit interval
and the offset guard's one-second re-read)."""


class PartitionProgress:
    """Per assigned partition: (next offset to process, when it last moved)."""

    def __init__(self, metrics: Metrics, clock: Callable[[], float] = time.monotonic) -> None:
        self._metrics = metrics
        self._clock = clock
        self._moved: dict[int, tuple[int, float]] = {}

    def update(
        self, assigned: dict[int, tuple[int | None, int | None]], *, rebalancing: bool = False
    ) -> None:
        """`assigned`: partition → (high watermark, next offset to process), either None
        when not known yet. During a rebalance no partition counts as stalled."""
        now = self._clock()
        stalled = 0
        lag_gauge = self._metrics.partition_lag
        for partition, (high, expected) in assigned.items():
            if high is None or expected is None:
                continue
            lag = max(0, high - expected)
            lag_gauge.labels(str(partition)).set(lag)
            moved = self._moved.get(partition)
            if moved is None or moved[0] != expected or rebalancing:
                self._moved[partition] = (expected, now)
            elif lag > 0 and now - moved[1] >= STALL_SECONDS:
                stalled += 1
        for partition in set(self._moved) - set(assigned):
            del self._moved[partition]
            lag_gauge.remove(str(partition))
        self._metrics.stalled_partitions.set(stalled)


def assigned_positions(
    consumer: Any, topic: str, next_offset: Callable[[Any], int | None]
) -> dict[int, tuple[int | None, int | None]]:
    """(high watermark, next offset to process) of each assigned partition of `topic`,
    through faust's public consumer API (`assignment`, `highwater`)."""
    positions: dict[int, tuple[int | None, int | None]] = {}
    for tp in consumer.assignment():
        if tp.topic == topic:
            high = consumer.highwater(tp)
            positions[tp.partition] = (None if high is None else int(high), next_offset(tp))
    return positions
