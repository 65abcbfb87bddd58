"""The worker's hook before each offset commit (`streams.app._guard_commits`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from loopwatch.streams.app import _guard_commits
from loopwatch.streams.outputs import BatchedOutputs
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
    _guard_commits(harness.app, harness.app.loopwatch_store, outputs)
    assert gc.get_freeze_count() == 0
    await harness.app.transport.before_commit()
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
    await harness.app.transport.before_commit()
    assert gc.get_freeze_count() == 0, "only the first commit freezes"


async def test_recording_outputs_leave_the_test_process_collector_alone(
    harness: Harness, unfrozen: None
) -> None:
    await harness.app.transport.before_commit()
    assert gc.get_freeze_count() == 0
