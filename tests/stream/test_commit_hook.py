"""The worker's hook before each offset commit (`streams.worker.app._guard_commits`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from loopwatch.streams.kafka.batched_outputs import BatchedOutputs
from loopwatch.streams.settings import Settings
from loopwatch.streams.worker.app import COMMIT_BY_TIME_ONLY, _guard_commits
from loopwatch.streams.worker.commit_timing import CommitTiming
from tests.stream.conftest import Harness


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _unused_producer() -> None:
    raise AssertionError("nothing to send")


async def test_the_first_commit_freezes_the_start_up_objects_out_of_the_collector(
    harness: Harness, unfrozen: None
) -> None:
    outputs = BatchedOutputs(_unused_producer, on_failure=lambda exc: None)
    registry = CollectorRegistry()
    timing = CommitTiming(registry, 0.5)
    _guard_commits(harness.app, harness.app.loopwatch_store, outputs, timing, fetch_wait_ms=0)
    assert gc.get_freeze_count() == 0
    await harness.app.transport.before_commit()
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
    await harness.app.transport.before_commit()
    assert gc.get_freeze_count() == 0, "only the first commit freezes"
    assert registry.get_sample_value("loopwatch_commit_seconds_count") == 2, "both timed"


async def test_recording_outputs_leave_the_test_process_collector_alone(
    harness: Harness, unfrozen: None
) -> None:
    await harness.app.transport.before_commit()
    assert gc.get_freeze_count() == 0


async def test_offsets_are_committed_by_time_never_by_count_inside_the_fetch_loop(
    harness: Harness,
) -> None:
    """faust commits every `broker_commit_every` acked records from inside its fetch loop,
    which then processes nothing until that commit (session writes, flush) is done; the
    worker's commits come from faust's commit task, every `commit_interval_ms`."""
    conf = harness.app.conf
    assert conf.broker_commit_every == COMMIT_BY_TIME_ONLY >= 2**31 - 1
    assert conf.broker_commit_interval == Settings().commit_interval_ms / 1000
