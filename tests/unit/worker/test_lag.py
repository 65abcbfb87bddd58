"""Partition lag and stalled partitions (streams.worker.lag) with a hand-driven clock."""

from __future__ import annotations

from loopwatch.streams.worker.lag import STALL_SECONDS, PartitionProgress
from loopwatch.streams.worker.metrics import Metrics


def _sample(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float | None:
    value = metrics.registry.get_sample_value(name, labels or {})
    return value


def test_lag_per_partition_and_a_partition_that_stops_moving_is_stalled() -> None:
    now = [100.0]
    metrics = Metrics()
    progress = PartitionProgress(metrics, clock=lambda: now[0])
    progress.update({0: (50, 40), 1: (10, 10), 2: (None, None)})
    assert _sample(metrics, "loopwatch_partition_lag", {"partition": "0"}) == 10
    assert _sample(metrics, "loopwatch_partition_lag", {"partition": "1"}) == 0
    assert _sample(metrics, "loopwatch_partition_lag", {"partition": "2"}) is None
    assert _sample(metrics, "loopwatch_stalled_partitions") == 0

    now[0] += STALL_SECONDS
    progress.update({0: (60, 40), 1: (10, 10)})  # 0 has not moved; 1 has no lag
    assert _sample(metrics, "loopwatch_stalled_partitions") == 1
    now[0] += 1
    progress.update({0: (60, 41), 1: (10, 10)}, rebalancing=False)  # it moved again
    assert _sample(metrics, "loopwatch_stalled_partitions") == 0

    progress.update({1: (12, 10)})  # partition 0 revoked: its gauge goes
    assert _sample(metrics, "loopwatch_partition_lag", {"partition": "0"}) is None
    assert _sample(metrics, "loopwatch_partition_lag", {"partition": "1"}) == 2
