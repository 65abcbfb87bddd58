"""Fail-open for real: the client with the broker down from the start, and with the worker
killed mid-run and started again (real broker, real worker subprocess).

No wall-clock figures are asserted: the waits' outcomes (timed out, skipped, complete)
and the breaker's counts say whether a model call waited.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import pytest

from loopwatch.streams.client import Call, LoopwatchClient, Session, VerdictWait
from loopwatch.streams.client.breaker import CircuitStats
from loopwatch.streams.demo.ports import free_ports
from loopwatch.streams.demo.worker_process import start_worker
from loopwatch.streams.settings import Settings
from tests.e2e.conftest import WORKER_READY_SECONDS

K = 3
SHORT_WAIT = 0.3  # a worker that is down: a wait gives up after this
LONG_WAIT = 60.0  # a worker that is up: a slow CI machine must not fail open
RECOVERY_SECONDS = 120.0


async def model_call(session: Session, step: int, *, timeout: float) -> VerdictWait:
    """One step of a looping agent (the same search, the same result), then the wait
    before its next model call."""
    call = Call(f"c{step}", "search", {"query": "direct flights SFO JFK"})
    await session.assistant(None, [call])
    await session.tool_result(call.id, "search", "no results")
    return await session.verdicts(timeout=timeout)


def state_reached(client: LoopwatchClient, state: str) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def changed(stats: CircuitStats) -> None:
        if stats.state == state and not future.done():
            future.set_result(None)

    client.breaker.listeners.append(changed)
    return future


async def test_with_the_broker_down_no_call_raises_and_waits_stop_after_k(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nothing_there = f"127.0.0.1:{free_ports()}"
    with caplog.at_level(logging.INFO, logger="loopwatch"):
        async with LoopwatchClient(
            bootstrap_servers=nothing_there,
            verdict_timeout=SHORT_WAIT,
            failure_threshold=K,
            probe_interval=0.2,
            log_timeouts=False,
        ) as client:
            session = await client.open_session("broker-down")
            await session.user("find me a flight", message_index=0)
            waits = [await model_call(session, step, timeout=SHORT_WAIT) for step in range(10)]
            stats = client.stats
            assert not stats.connected
            assert stats.circuit.state == "open" and stats.circuit.opens == 1
            # a failed connection counts: at most K waits waited, every later one skipped
            waited = [w for w in waits if not w.skipped]
            assert 1 <= len(waited) <= K and not any(w.complete for w in waited)
            assert all(w.skipped for w in waits[len(waited) :])
            assert stats.skipped_waits == 10 - len(waited)
            assert stats.published == 0 and stats.buffered == 21
            await session.end()
        # close() did not deliver while open: what was left is counted as dropped
        assert client.stats.dropped == 22 and client.stats.buffered == 0
    cannot = [r for r in caplog.records if r.getMessage().startswith("cannot connect to Kafka")]
    opened = [r for r in caplog.records if "circuit open" in r.getMessage()]
    assert len(cannot) == 1 and len(opened) == 1


@pytest.mark.kafka
async def test_the_circuit_opens_when_the_worker_dies_and_closes_when_it_returns(
    e2e_settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    worker = await start_worker(e2e_settings, tmp_path / "worker-1.log", WORKER_READY_SECONDS)
    try:
        async with LoopwatchClient.from_settings(
            e2e_settings, failure_threshold=K, probe_interval=1.0, log_timeouts=False
        ) as client:
            session = await client.open_session("worker-comes-and-goes")
            await session.user("find me a flight", message_index=0)
            first = await session.verdicts(timeout=LONG_WAIT)
            assert first.complete

            worker.stop(signal.SIGKILL)  # killed mid-run
            opened = state_reached(client, "open")
            down = [await model_call(session, step, timeout=SHORT_WAIT) for step in range(K)]
            assert [w.complete or w.skipped for w in down] == [False] * K
            assert opened.done() and client.stats.circuit.last_opened_by == "timeout"
            skipped = await model_call(session, K, timeout=LONG_WAIT)
            assert skipped.skipped and not skipped.complete  # no wait at all

            closed = state_reached(client, "closed")
            worker = await start_worker(
                e2e_settings, tmp_path / "worker-2.log", WORKER_READY_SECONDS
            )
            # the returning worker answers the events of the outage: the circuit closes
            await asyncio.wait_for(closed, RECOVERY_SECONDS)
            back = await model_call(session, K + 1, timeout=LONG_WAIT)
            assert back.complete and not back.skipped
            # the loop of the outage is warned about once verdicts flow again
            assert {placed.warning.rule for placed in back.warnings} >= {"repeated_result"}
            circuit = client.stats.circuit
            assert (circuit.state, circuit.opens, circuit.closes) == ("closed", 1, 1)
            await session.end()
    finally:
        code = worker.stop()
    assert code == 0, f"the worker exited with {code}; see {worker.log_path}"
    assert len([r for r in caplog.records if "circuit closed" in r.getMessage()]) == 1


@pytest.mark.kafka
async def test_a_delivery_the_producer_gives_up_on_is_a_failure_and_goes_back(
    e2e_settings: Settings,
) -> None:
    """The events topic does not exist (the broker creates no topics by itself): the
    producer gives up, the batch goes back to the buffer, the breaker counts it."""
    async with LoopwatchClient(
        bootstrap_servers=e2e_settings.bootstrap_servers,
        events_topic=f"{e2e_settings.events_topic}-missing",
        verdicts_topic=e2e_settings.verdicts_topic,
        failure_threshold=1,
        probe_interval=60.0,  # no second attempt during the test
        kafka_options={"request_timeout_ms": 1000},
    ) as client:
        opened = state_reached(client, "open")
        session = await client.open_session("nowhere-to-go")
        await session.user("hello", message_index=0)
        await session.assistant("hi", message_index=1)
        await asyncio.wait_for(opened, RECOVERY_SECONDS)
        stats = client.stats
        assert stats.circuit.last_opened_by == "publish"
        assert (stats.published, stats.publish_errors, stats.buffered) == (0, 2, 2)
        wait = await session.verdicts(timeout=LONG_WAIT)
        assert wait.skipped
    assert client.stats.dropped == 2 and client.stats.buffered == 0
