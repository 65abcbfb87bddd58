"""Runtime ⇄ app through a real broker: unique topics per test, the worker a subprocess."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from loopwatch.streams.demo.ports import free_ports
from loopwatch.streams.demo.worker_process import WorkerProcess, start_worker
from loopwatch.streams.kafka.admin import create_topics
from loopwatch.streams.settings import Settings

WORKER_READY_SECONDS = 120.0


@pytest.fixture
async def e2e_settings(kafka_settings: Settings, tmp_path: Path) -> Settings:
    """This test's settings (own topics, app id, web port, data dir); topics created."""
    settings = kafka_settings.model_copy(
        update={"web_port": free_ports(), "data_dir": str(tmp_path / "worker-data")}
    )
    await create_topics(settings)
    return settings


@pytest.fixture
async def worker(e2e_settings: Settings, tmp_path: Path) -> AsyncIterator[WorkerProcess]:
    """A `loopwatch worker` subprocess that has answered a probe event."""
    process = await start_worker(e2e_settings, tmp_path / "worker.log", WORKER_READY_SECONDS)
    try:
        yield process
    finally:
        code = process.stop()
        assert code == 0, f"the worker exited with {code}; see {process.log_path}"


@pytest.fixture
async def extended_worker(e2e_settings: Settings, tmp_path: Path) -> AsyncIterator[WorkerProcess]:
    """A `loopwatch worker` judging by the `extended` profile (escalation levels,
    docs/contract.md §9.13), on this test's topics."""
    settings = e2e_settings.model_copy(update={"profile": "extended"})
    process = await start_worker(settings, tmp_path / "worker.log", WORKER_READY_SECONDS)
    try:
        yield process
    finally:
        code = process.stop()
        assert code == 0, f"the worker exited with {code}; see {process.log_path}"
