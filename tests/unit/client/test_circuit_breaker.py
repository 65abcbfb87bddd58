"""The circuit breaker's states and counts, the outbox's bound, a session's skipped wait
(pure: a fake clock, no broker)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from loopwatch.models import LoopVerdict
from loopwatch.streams.client import LoopwatchClient
from loopwatch.streams.client.breaker import CircuitBreaker, CircuitStats
from loopwatch.streams.client.encoding import EventEncoder
from loopwatch.streams.client.outbox import Outbox, Outgoing
from loopwatch.streams.client.session import Session
from loopwatch.streams.client.stats import ClientStats
from tests.support.clocks import ManualClock

TS = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def breaker(clock: ManualClock, k: int = 3, probe: float = 2.0) -> CircuitBreaker:
    return CircuitBreaker(k, probe, monotonic=clock, wall_clock=clock)


def test_k_consecutive_failures_open_it_once_and_log_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    b = breaker(clock)
    changes: list[str] = []
    b.listeners.append(lambda stats: changes.append(stats.state))
    with caplog.at_level(logging.WARNING):
        b.failure("connect")
        b.failure("timeout")
        assert not b.is_open and b.stats.consecutive_failures == 2
        b.failure("timeout")
        assert b.is_open
        b.failure("publish")  # not counted while open
    assert b.stats == CircuitStats(
        state="open",
        consecutive_failures=3,
        failure_threshold=3,
        opens=1,
        closes=0,
        last_opened_by="timeout",
        changed_at=100.0,
    )
    assert changes == ["open"]
    assert len([r for r in caplog.records if "circuit open" in r.message]) == 1


def test_a_verdict_in_time_resets_the_count_a_late_one_does_not() -> None:
    b = breaker(ManualClock())
    b.failure("timeout")
    b.failure("timeout")
    b.verdict_arrived()  # late: its wait gave up already
    assert b.stats.consecutive_failures == 2
    b.wait_succeeded()
    assert b.stats.consecutive_failures == 0
    b.failure("timeout")
    b.failure("timeout")
    assert not b.is_open


def test_it_closes_on_the_first_verdict_once_open_for_the_probe_interval() -> None:
    clock = ManualClock()
    b = breaker(clock, k=2, probe=2.0)
    b.failure("timeout")
    b.failure("timeout")
    clock.now += 1.0
    b.verdict_arrived()  # merely late, right after it opened
    assert b.is_open
    clock.now += 1.0
    b.wait_succeeded()  # a wait while open does not close it either
    assert b.is_open
    b.verdict_arrived()
    assert not b.is_open
    assert (b.stats.opens, b.stats.closes, b.stats.consecutive_failures) == (1, 1, 0)
    # a worker that always answers too late: the circuit cycles
    b.failure("timeout")
    b.failure("timeout")
    assert b.is_open and b.stats.opens == 2


def test_the_outbox_drops_the_oldest_and_puts_failed_batches_back_in_order() -> None:
    async def scenario() -> None:
        stats = ClientStats()
        loop = asyncio.get_running_loop()
        box = Outbox(3, stats)
        events = [Outgoing(b"s", bytes([n]), loop.create_future()) for n in range(5)]
        for event in events:
            box.append(event)
        assert (stats.dropped, stats.buffered) == (2, 3)
        batch = box.take(2)
        assert [e.record for e in batch] == [b"\x02", b"\x03"]
        box.append(Outgoing(b"s", b"\x05", loop.create_future()))
        box.put_back(batch)  # 4 held: the oldest goes
        assert [e.record for e in box.take()] == [b"\x03", b"\x04", b"\x05"]
        assert (stats.dropped, stats.buffered) == (3, 0)

    asyncio.run(scenario())


def session_with(b: CircuitBreaker, stats: ClientStats) -> Session:
    async def publish(session_id: str, record: bytes) -> asyncio.Future[Any] | None:
        return None

    return Session(
        session_id="s",
        encoder=EventEncoder(session_id="s", agent_id="a", local_fingerprints=False),
        publish=publish,
        on_close=lambda _: None,
        stats=stats,
        clock=lambda: TS,
        default_timeout=0.01,
        log_timeouts=False,
        breaker=b,
    )


def test_while_open_a_wait_returns_at_once_with_what_has_arrived() -> None:
    async def scenario() -> None:
        stats = ClientStats()
        clock = ManualClock()
        b = breaker(clock, k=2, probe=2.0)
        session = session_with(b, stats)
        await session.user("hi", message_index=0)
        first = await session.verdicts()  # times out (0.01 s): failure 1
        second = await session.verdicts()  # failure 2: open
        assert not first.skipped and not second.skipped and b.is_open
        third = await session.verdicts(timeout=60.0)
        assert third.skipped and not third.complete
        assert (stats.waits, stats.timeouts, stats.skipped_waits) == (3, 2, 1)
        clock.now += 2.0
        session.on_verdict(
            LoopVerdict(
                session_id="s", seq=0, agent_id="a", event_ts=TS, evaluated_at=TS, warning=None
            )
        )
        assert not b.is_open
        fourth = await session.verdicts()
        assert fourth.complete and not fourth.skipped

    asyncio.run(scenario())


def test_an_event_that_cannot_be_encoded_is_dropped_not_raised() -> None:
    async def scenario() -> None:
        stats = ClientStats()
        session = session_with(breaker(ManualClock()), stats)
        seq = await session.tool_result("c1", "calc", result=float("nan"))
        assert stats.dropped == 1 and session.last_seq is None
        assert await session.user("next") == seq  # the seq was not used

    asyncio.run(scenario())


async def test_the_counters_reach_a_prometheus_registry_when_asked() -> None:
    registry = CollectorRegistry()
    client = LoopwatchClient(bootstrap_servers="127.0.0.1:1", registry=registry)
    client.breaker.failure("connect")
    client.stats.skipped_waits += 2
    assert registry.get_sample_value("loopwatch_client_skipped_waits_total") == 2
    assert registry.get_sample_value("loopwatch_client_circuit_opens_total") == 0
    assert registry.get_sample_value("loopwatch_client_circuit_consecutive_failures") == 1
    assert registry.get_sample_value("loopwatch_client_connected") == 0
    await client.close()  # never started: nothing to deliver, nothing raises
