"""Two workers sharing the partitions give the same verdicts as one, with a rebalance
(a second worker joining, then the first leaving) while events flow."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.worker_harness import (
    WorkerEnv,
    WorkerProcess,
    consume,
    event_records,
    loop_dense_stream,
    produce,
    scan_verdicts,
    verdict_key,
    without_clock,
)

pytestmark = pytest.mark.kafka


async def test_two_workers_give_the_verdicts_of_one(kafka_bootstrap: str, tmp_path: Path) -> None:
    env = WorkerEnv.unique(kafka_bootstrap, partitions=4)
    await env.create_topics()
    events = loop_dense_stream(sessions=120, steps=10, seed=11)
    expected = scan_verdicts(events)
    thirds = [events[i * len(events) // 3 : (i + 1) * len(events) // 3] for i in range(3)]

    first = WorkerProcess(env, tmp_path, "first")
    second: WorkerProcess | None = None
    try:
        await produce(kafka_bootstrap, env.events, event_records(thirds[0]))
        second = WorkerProcess(env, tmp_path, "second")  # joins: partitions move
        await produce(kafka_bootstrap, env.events, event_records(thirds[1]))
        first.stop()  # leaves: its partitions move to the second worker
        await produce(kafka_bootstrap, env.events, event_records(thirds[2]))
        records = await consume(
            kafka_bootstrap, env.verdicts, until=len(expected), distinct=verdict_key
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{second.web_port}/metrics") as page:
            second_metrics = page.read().decode()
    finally:
        first.stop()
        if second is not None:
            second.stop()

    got: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        verdict = without_clock(record.value)
        # A rebalance may replay uncommitted events: any repeat must be identical.
        assert got.setdefault(verdict_key(record), verdict) == verdict
    assert got == expected, (first.log()[-2000:], second.log()[-2000:] if second else "")
    assert len({json.loads(r.value)["session_id"] for r in records}) == 120
    # The second worker took over partitions and processed part of the stream.
    (line,) = [x for x in second_metrics.splitlines() if x.startswith("loopwatch_verdicts_total")]
    assert 0 < float(line.split()[1]) <= len(expected)
