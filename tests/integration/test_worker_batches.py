"""The batch hand-off (`LOOPWATCH_BATCH_HAND_OFF`, the default) on the real broker: a
worker killed with `kill -9` in the middle of a backlog (also on faust's per-record loop),
and one joined by a second (a rebalance splits its batches), give `loopwatch scan`'s
verdicts for every event, any repeat identical. (`TEST_BATCH_HAND_OFF=0` runs the whole
integration suite over the per-record loop.)"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.integration.worker_harness import (
    WorkerEnv,
    WorkerProcess,
    consume,
    event_records,
    failover_deadline,
    loop_dense_stream,
    metric_value,
    metrics_page,
    produce,
    scan_verdicts,
    verdict_key,
    without_clock,
)

pytestmark = pytest.mark.kafka

BATCHES = ("LOOPWATCH_BATCH_HAND_OFF", "true")
COMMITS_TIMED = "loopwatch_commit_seconds_count"


def _distinct(records: list[Any]) -> dict[tuple[str, int], dict[str, Any]]:
    got: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        verdict = without_clock(record.value)
        # a replay after the kill or the rebalance may resend: identical, or a bug
        assert got.setdefault(verdict_key(record), verdict) == verdict
    return got


@pytest.mark.parametrize("batches", ["true", "false"])
async def test_a_worker_killed_in_a_backlog_loses_and_contradicts_no_verdict(
    kafka_bootstrap: str, tmp_path: Path, batches: str
) -> None:
    env = WorkerEnv.unique(
        kafka_bootstrap,
        partitions=4,
        extra=(("LOOPWATCH_BATCH_HAND_OFF", batches), ("LOOPWATCH_WORKER_ID", "batches")),
    )
    await env.create_topics()
    events = loop_dense_stream(sessions=600, steps=12, seed=5)
    expected = scan_verdicts(events)
    await produce(kafka_bootstrap, env.events, event_records(events))

    worker = WorkerProcess(env, tmp_path, "first")
    try:
        some = await consume(
            kafka_bootstrap, env.verdicts, until=len(expected) // 10, distinct=verdict_key
        )
        assert len({verdict_key(r) for r in some}) >= len(expected) // 10, worker.log_excerpt()
    finally:
        worker.stop(signal.SIGKILL)  # in the middle of the backlog
    worker = WorkerProcess(env, tmp_path, "second")
    try:
        records = await consume(
            kafka_bootstrap,
            env.verdicts,
            until=len(expected),
            distinct=verdict_key,
            deadline=failover_deadline(env.settings()) + 60,
        )
        # its first offset commit may come after the last verdict: wait for it
        metrics = metrics_page(
            worker.web_port, lambda page: metric_value(page, COMMITS_TIMED) > 0, deadline=30
        )
    finally:
        worker.stop()
    assert _distinct(records) == expected, worker.log_excerpt()
    assert metric_value(metrics, "loopwatch_verdicts_total") > 0, "the rest was processed here"
    assert metric_value(metrics, COMMITS_TIMED) > 0, "its commits were timed"
    # a commit in a backlog outlasts the interval: faust's timer warning is not logged
    assert "is overlapping" not in worker.log(), worker.log_excerpt()


async def test_a_rebalance_under_a_backlog_gives_the_verdicts_of_one_worker(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = WorkerEnv.unique(kafka_bootstrap, partitions=4, extra=(BATCHES,))
    await env.create_topics()
    events = loop_dense_stream(sessions=600, steps=12, seed=9)
    expected = scan_verdicts(events)
    await produce(kafka_bootstrap, env.events, event_records(events))

    first = WorkerProcess(env, tmp_path, "first")
    second: WorkerProcess | None = None
    try:
        await consume(
            kafka_bootstrap, env.verdicts, until=len(expected) // 10, distinct=verdict_key
        )
        second = WorkerProcess(env, tmp_path, "second")  # joins mid-backlog: partitions move
        records = await consume(
            kafka_bootstrap, env.verdicts, until=len(expected), distinct=verdict_key
        )
    finally:
        first.stop()
        if second is not None:
            second.stop()
    logs = (first.log_excerpt(), second.log_excerpt() if second else "")
    assert _distinct(records) == expected, logs
