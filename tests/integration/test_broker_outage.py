"""A broker outage, on a broker of the test's own: the worker logs it in three lines (not
thousands), counts its seconds, and carries on by itself when the broker is back."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from loopwatch.streams.demo.ports import free_ports
from tests.integration.test_local_broker_script import kafka_sh
from tests.integration.worker_harness import (
    WorkerEnv,
    WorkerProcess,
    consume,
    event_records,
    produce,
    verdict_key,
)
from tests.support.builders import SessionBuilder

pytestmark = pytest.mark.kafka

# Broker start-up is 20-50 s on a loaded 2-core machine; a retrying client needs
# the session timeout and a few seconds more after that.
BROKER_START_SECONDS = 120.0


def wait_for(
    condition: Callable[[], bool], deadline: float, what: str, log: Callable[[], str]
) -> None:
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"no {what} within {deadline:.0f} s; worker log:\n{log()}")
        time.sleep(0.2)  # polling the worker's log file against a deadline


async def test_an_outage_is_logged_once_summarised_and_ended(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    port, data = free_ports(2), tmp_path / "broker"
    assert kafka_sh("up", data=data, port=port).returncode == 0
    worker = None
    try:
        bootstrap = f"127.0.0.1:{port}"
        env = WorkerEnv.unique(bootstrap, partitions=1)
        await env.create_topics()  # on a broker that has just started: a fresh coordinator
        worker = WorkerProcess(env, tmp_path)
        b = SessionBuilder("outage")
        await produce(bootstrap, env.events, event_records([b.user()]))
        assert len(await consume(bootstrap, env.verdicts, until=1)) == 1, worker.log_excerpt()

        assert kafka_sh("down", data=data, port=port).returncode == 0
        wait_for(
            lambda: "Kafka broker unavailable" in worker.log(),
            60,
            "outage line",
            worker.log_excerpt,
        )
        assert kafka_sh("up", data=data, port=port).returncode == 0
        wait_for(
            lambda: "Kafka broker available again" in worker.log(),
            BROKER_START_SECONDS,
            "end-of-outage line",
            worker.log_excerpt,
        )
        await produce(bootstrap, env.events, event_records([b.user()]))
        verdicts = await consume(bootstrap, env.verdicts, until=2, distinct=verdict_key)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{worker.web_port}/metrics").read()
    finally:
        if worker is not None:
            worker.stop()
        kafka_sh("down", data=data, port=port)
    log = worker.log()
    assert len({verdict_key(r) for r in verdicts}) == 2, worker.log_excerpt()  # it carried on
    assert log.count("Kafka broker unavailable") == 1, worker.log_excerpt()
    assert log.count("Kafka broker available again") == 1
    # aiokafka's line per retry is gone: only the outage line quotes the first error
    retries = [line for line in log.splitlines() if "Unable connect to node" in line]
    assert all("Kafka broker unavailable" in line for line in retries), retries[:5]
    error_lines = [line for line in log.splitlines() if "[ERROR]" in line]
    assert len(error_lines) <= 5, "\n".join(error_lines[:20])
    seconds = re.search(rb"loopwatch_broker_unavailable_seconds_total ([0-9.]+)", metrics)
    assert seconds is not None and float(seconds.group(1)) > 0
    # a normal start on a fresh broker: no coordinator error, no spinner escape codes
    assert "Group Coordinator Request failed" not in log
    assert "\x1b[" not in log
