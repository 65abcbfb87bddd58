"""/healthz and /ready on the worker's web port, and a surviving worker taking over the
partitions of one killed with SIGKILL within the configured timeouts."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.integration.worker_harness import (
    WorkerEnv,
    WorkerProcess,
    consume,
    event_records,
    failover_deadline,
    produce,
    verdict_key,
)
from tests.support.builders import SessionBuilder

pytestmark = pytest.mark.kafka


async def test_ready_names_the_partitions_and_healthz_answers(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = WorkerEnv.unique(kafka_bootstrap, partitions=3)
    await env.create_topics()
    worker = WorkerProcess(env, tmp_path)
    try:
        ready = worker.wait_ready_blocking()
        healthz = worker.get("/healthz")
        threads = _thread_names(worker.proc.pid)
    finally:
        worker.stop()
    assert ready == {
        "ready": True,
        "partitions": [0, 1, 2],
        "processing_crashes": 0,
        "agent_crashes": 0,
    }
    assert healthz == (200, {"status": "ok"})
    # The Kafka consumer runs on the worker's event loop (streams.kafka.faust_ext.loop_consumer),
    # not in a thread of its own as faust runs it.
    assert len(threads) == 1, threads


def _thread_names(pid: int) -> list[str]:
    tasks = Path(f"/proc/{pid}/task")
    return sorted((task / "comm").read_text().strip() for task in tasks.iterdir())


def _partitions(worker: WorkerProcess) -> set[int]:
    status, document = worker.get("/ready")
    return set(document["partitions"]) if status == 200 else set()


async def test_a_surviving_worker_takes_over_within_the_timeouts(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = WorkerEnv.unique(kafka_bootstrap, partitions=4)
    await env.create_topics()
    first = WorkerProcess(env, tmp_path, "first", worker_id="first")
    second = WorkerProcess(env, tmp_path, "second", worker_id="second")
    sessions = [SessionBuilder(f"takeover-{n}") for n in range(24)]  # on every partition
    try:
        end = time.monotonic() + 120
        while not (_partitions(first) and _partitions(second)):  # both got a share
            assert time.monotonic() < end, (first.log()[-2000:], second.log()[-2000:])
            time.sleep(0.2)  # polling the probes against a deadline
        assert _partitions(first) | _partitions(second) == {0, 1, 2, 3}
        first.stop(signal.SIGKILL)
        await produce(kafka_bootstrap, env.events, event_records([b.user() for b in sessions]))
        records = await consume(
            kafka_bootstrap,
            env.verdicts,
            until=len(sessions),
            distinct=verdict_key,
            deadline=failover_deadline(env.settings()),
        )
        taken_over = second.wait_ready_blocking()
    finally:
        first.stop()
        second.stop()
    assert {verdict_key(r) for r in records} == {(b.session_id, 0) for b in sessions}, second.log()[
        -3000:
    ]
    assert taken_over["partitions"] == [0, 1, 2, 3]
