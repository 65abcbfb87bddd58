"""Loop episodes through the worker (faust `test_context()`, recording outputs): the
records equal `scan --episodes`, a replay resends the unacknowledged ones byte for byte,
idle expiry closes open ones as `expired`, and the loop metrics count them."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from loopwatch.models import EPISODE_ADAPTER, DetectionConfig
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.worker.record import SessionRecord
from tests.stream.conftest import Harness
from tests.support.builders import SessionBuilder


def _broken_loop(session_id: str = "s1") -> SessionBuilder:
    """Three identical searches with the same result, then a different call."""
    b = SessionBuilder(session_id)
    b.user("find it")
    for _ in range(3):
        b.call("search", {"q": "x"})
        b.result(result="nothing")
    b.call("search", {"q": "y"})
    b.result(result="found")
    return b


def _scan_episodes(b: SessionBuilder) -> list[bytes]:
    scanner = Scanner(DetectionConfig())
    out: list[bytes] = []
    for event in b.events:
        scanner.judge(event)
        out.extend(episode.to_json() for episode in scanner.closed_episodes)
    return out


async def test_closed_episodes_are_published_like_scan_prints_them(harness: Harness) -> None:
    b = _broken_loop()
    for event in b.events:
        await harness.put_event(event)
    published = [sent.value for sent in harness.on("episodes")]
    assert published == _scan_episodes(b)
    episodes = [EPISODE_ADAPTER.validate_json(value or b"") for value in published]
    assert {(e.rule, e.outcome) for e in episodes} == {
        ("repeated_result", "broken"),
        ("repeated_batch", "broken"),
    }
    assert {sent.key for sent in harness.on("episodes")} == {b"s1"}
    text = harness.metrics_text()
    assert 'loopwatch_loops_started_total{agent_id="agent-a",rule="repeated_result"} 1.0' in text
    assert 'loopwatch_loops_ended_total{outcome="broken",rule="repeated_result"} 1.0' in text
    assert 'loopwatch_loops_by_tool_total{tool="search"} 2.0' in text
    assert 'loopwatch_looping_sessions_total{agent_id="agent-a"} 1.0' in text
    assert 'loopwatch_sessions_started_total{agent_id="agent-a"} 1.0' in text
    assert 'loopwatch_loop_time_to_break_seconds_count{rule="repeated_result"} 1.0' in text
    assert 'loopwatch_loop_peak_repeats_bucket{le="3.0",rule="repeated_result"} 1.0' in text
    assert "_created" not in text


async def test_session_end_closes_open_episodes(harness: Harness) -> None:
    b = SessionBuilder("s1")
    for _ in range(3):
        b.call("search", {"q": "x"})
        b.result(result="nothing")
    end = b.end()
    for event in b.events:
        await harness.put_event(event)
    episodes = [json.loads(sent.value or b"") for sent in harness.on("episodes")]
    assert {e["outcome"] for e in episodes} == {"session_ended"}
    assert {e["last_seq"] for e in episodes} == {end.seq}


async def test_replay_resends_the_unacknowledged_episode_records(
    harness_factory: Callable[[], Awaitable[Harness]],
) -> None:
    first_worker = await harness_factory()
    b = _broken_loop()
    for event in b.events[:-1]:
        await first_worker.put_event(event)
    first_worker.hold_acks = True  # the broker never acknowledges the closing event's records
    await first_worker.put_event(b.events[-1])
    sent_first = [sent.value for sent in first_worker.on("episodes")]
    assert len(sent_first) == 2
    stored = SessionRecord.decode(first_worker.table[b"s1"])
    assert [payload for _, payload in stored.unconfirmed_episodes] == sent_first

    # A new worker with the stored table reads the uncommitted event again.
    second_worker = await harness_factory()
    for key, value in first_worker.table.data.items():
        second_worker.table.data[key] = value
    await second_worker.put_event(b.events[-1])
    assert [sent.value for sent in second_worker.on("episodes")] == sent_first
    await second_worker.put_event(b.events[-1])  # sent by this worker now: not again
    assert len(second_worker.on("episodes")) == 2


async def test_acknowledged_episodes_leave_the_stored_record(harness: Harness) -> None:
    b = _broken_loop()
    for event in b.events:
        await harness.put_event(event)
    await harness.put_event(b.text())
    assert SessionRecord.decode(harness.table[b"s1"]).unconfirmed_episodes == ()


@pytest.mark.parametrize("settings_overrides", [{"session_ttl_seconds": 3600}])
async def test_idle_expiry_closes_open_episodes_as_expired(harness: Harness) -> None:
    looping = SessionBuilder("looping")
    for _ in range(3):
        looping.call("search", {"q": "x"})
        looping.result(result="nothing")
    for event in looping.events:
        await harness.put_published(event)
    assert harness.on("episodes") == []

    other = SessionBuilder("other")
    other.seq = 3700  # event time past the looping session's deadline
    await harness.put_published(other.user())
    assert b"looping" not in harness.table
    episodes = [json.loads(sent.value or b"") for sent in harness.on("episodes")]
    assert {(e["rule"], e["outcome"]) for e in episodes} == {
        ("repeated_result", "expired"),
        ("repeated_batch", "expired"),
    }
    last_warned = looping.events[-1].seq
    assert {e["last_seq"] for e in episodes} <= set(range(last_warned + 1))
    assert {sent.key for sent in harness.on("episodes")} == {b"looping"}
    text = harness.metrics_text()
    assert 'loopwatch_loops_ended_total{outcome="expired",rule="repeated_result"} 1.0' in text
