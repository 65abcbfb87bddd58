"""Idle expiry that cannot eat a live session (docs/contract.md §8.5), on the pipeline as
the worker drives it (tests.support.pipeline), against `loopwatch scan`'s scanner.

Property: sessions whose event times are skewed against each other (two days old, now,
days ahead) and jump past the TTL inside a session, interleaved on two partitions, with
records replayed, Kafka timestamps skewed (or the agent's), and the worker killed and restored
from its last commit at any point: every (session, seq) gets exactly the warning and the
`state_reset` flag the scanner gives for the same input, and none is lost."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.models import AgentEvent, DetectionConfig
from loopwatch.streams.kafka.expiry import epoch_seconds
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.worker.pipeline import Processed
from loopwatch.streams.worker.store import MemorySessionStore
from loopwatch.streams.worker.table_store import TableSessionStore
from tests.support.builders import SessionBuilder
from tests.support.pipeline import NOW, FakeTable, Pipeline, over_table, record_of

TTL = 3600.0  # tests.support.pipeline.expiry_index's idle TTL
DAY = timedelta(days=1)
SESSIONS = ("s0", "s1", "s2", "s3")


def _partition(key: bytes | None) -> int:
    return 0 if key is None else sum(key) % 2


def _judged(payload: bytes) -> tuple[str | None, int | None, bool]:
    verdict = json.loads(payload)
    warning = verdict["warning"]
    return (
        None if warning is None else warning["rule"],
        None if warning is None else warning["count"],
        verdict.get("state_reset", False),
    )


def _scanned(events: list[AgentEvent]) -> dict[tuple[str, int], tuple[Any, ...]]:
    scanner = Scanner(DetectionConfig(), idle_ttl=TTL)
    return {
        (v.session_id, v.seq): _judged(v.to_json()) for v in scanner.run(events) if v is not None
    }


def _looping(session_id: str, shift: timedelta) -> SessionBuilder:
    """A builder whose events are stamped `shift` away from the others'."""
    b = SessionBuilder(session_id)
    b.shift = shift  # type: ignore[attr-defined]
    return b


def _shifted(b: SessionBuilder, event: AgentEvent) -> AgentEvent:
    return event.model_copy(update={"ts": event.ts + b.shift})  # type: ignore[attr-defined]


@st.composite
def _feeds(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """("event", event, log skew) / ("replay", index) / ("commit", None) items."""
    shifts = st.sampled_from([-2 * DAY, timedelta(0), timedelta(hours=3), 5 * DAY])
    builders = {s: _looping(s, draw(shifts)) for s in SESSIONS}
    feed: list[tuple[str, Any]] = []
    sent: list[AgentEvent] = []
    for _ in range(draw(st.integers(min_value=5, max_value=50))):
        kind = draw(st.sampled_from(["loop", "loop", "other", "jump", "replay", "commit"]))
        b = builders[draw(st.sampled_from(SESSIONS))]
        if kind == "commit":
            feed.append(("commit", None))
            continue
        if kind == "replay" and sent:
            feed.append(("replay", draw(st.integers(min_value=0, max_value=len(sent) - 1))))
            continue
        if kind == "jump":  # the session's own clock jumps past the TTL (or just short)
            b.seq += draw(st.sampled_from([int(TTL) - 5, int(TTL) + 1, 3 * int(TTL)]))
            event = b.user("back again")
        elif kind == "other":
            event = b.step(("read_file", {"path": f"{len(b.events)}.py"}))
        else:
            b.step(("read_file", {"path": "a.py"}))
            event = b.result(result="same text")
        event = _shifted(b, event)
        # The record's Kafka timestamp against the worker's clock; None: the agent's own
        # clock stamped it (its event's `ts`, skewed as the session's events are).
        skew = draw(st.one_of(st.none(), st.sampled_from([-2 * 86400.0, 0.0, 7 * 86400.0])))
        feed.append(("event", (event, skew)))
        sent.append(event)
    return feed


@dataclass
class _Worker:
    table: FakeTable
    pipeline: Pipeline[TableSessionStore] = field(init=False)

    def __post_init__(self) -> None:
        self.pipeline = over_table(self.table, deferred=True, partition_of=_partition)


def _run(feed: list[tuple[str, Any]], crash_at: int) -> tuple[list[Any], list[AgentEvent]]:
    """The feed through a worker killed after `crash_at` items and restored from its last
    commit (the records after it read again); returns the sends and the events in the
    order the records were read."""
    records: list[tuple[AgentEvent, float | None] | None] = []
    events: list[AgentEvent] = []
    for kind, item in feed:
        if kind == "commit":
            records.append(None)
        elif kind == "replay":
            records.append((events[item], None))
        else:
            records.append(item)
        if records[-1] is not None:
            events.append(records[-1][0])  # type: ignore[index]
    wall = epoch_seconds(NOW)
    worker, committed = _Worker(FakeTable()), 0
    sends: list[Any] = []
    crash_at = min(crash_at, len(records))

    def feed_one(w: _Worker, index: int) -> None:
        item = records[index]
        if item is None:
            w.pipeline.store.write_pending()
            return
        event, skew = item
        key, value = record_of(event)
        partition = _partition(key)
        w.table.partition = partition
        now = NOW + timedelta(seconds=index)  # a second of wall time per record
        stamp = None if skew is None else wall + index + skew
        w.pipeline.process(key, value, partition, log_time=stamp, now=now)

    for index in range(crash_at):
        feed_one(worker, index)
        if records[index] is None:
            committed = index + 1
    sends.extend(worker.pipeline.sent)
    restored = FakeTable()
    restored.update(worker.table)  # the changelog as of the last commit
    second = _Worker(restored)
    for index in range(committed, len(records)):
        feed_one(second, index)
    sends.extend(second.pipeline.sent)
    return sends, events


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(feed=_feeds(), crash_at=st.integers(min_value=0, max_value=60))
def test_live_verdicts_equal_the_scan_over_skew_replays_and_kills(
    feed: list[tuple[str, Any]], crash_at: int
) -> None:
    sends, events = _run(feed, crash_at)
    expected = _scanned(events)
    delivered: dict[tuple[str, int], set[tuple[Any, ...]]] = {}
    for session_id, seq, payload in sends:
        delivered.setdefault((session_id, seq), set()).add(_judged(payload))
    assert set(delivered) == set(expected)  # none lost, none invented
    for ident, judged in delivered.items():
        assert judged == {expected[ident]}  # same warning, same state_reset


def _cyclic(session_id: str, shift: timedelta) -> list[AgentEvent]:
    b = SessionBuilder(session_id)
    b.user("fix the bug")
    for _ in range(4):
        b.step(("read_file", {"path": "a.py"}))
        b.result(result="same text")
    return [event.model_copy(update={"ts": event.ts + shift}) for event in b.events]


def test_a_two_day_old_session_beside_fresh_traffic_keeps_its_warnings() -> None:
    """The issue's experiment, in miniature: before contract 1.2 the partition's clock
    (the newest event time) expired the old session before each of its events."""
    old = _cyclic("old", -2 * DAY)
    fresh = [_cyclic(f"fresh-{n}", timedelta(hours=26)) for n in range(3)]
    worker = Pipeline(MemorySessionStore())
    feed = [event for events in zip(old, *fresh, strict=True) for event in events]
    for index, event in enumerate(feed):  # Kafka timestamps: when each was published
        worker.process(*record_of(event), log_time=epoch_seconds(NOW) - 60 + index)
    expected = _scanned(feed)
    got = {(s, seq): _judged(p) for s, seq, p in worker.sent}
    assert got == expected
    assert sum(1 for (s, _), j in got.items() if s == "old" and j[0] is not None) >= 2


def test_an_event_past_the_ttl_of_its_own_session_resets_it_and_says_so() -> None:
    b = SessionBuilder("s1")
    b.user("fix the bug")
    for _ in range(3):
        b.step(("read_file", {"path": "a.py"}))
        b.result(result="same text")
    b.seq += int(TTL) + 1
    back = b.user("back again")
    worker = Pipeline(MemorySessionStore())
    outcomes = worker.run_events(b.events)
    last = outcomes[-1]
    assert isinstance(last, Processed) and last.verdict.state_reset
    assert b'"state_reset":true' in last.payload
    assert {e.outcome for e in last.expired_episodes} == {"expired"}  # its loops end first
    assert not any(isinstance(o, Processed) and o.verdict.state_reset for o in outcomes[:-1])
    scanner = Scanner(DetectionConfig(), idle_ttl=TTL)
    verdicts = list(scanner.run(b.events))
    assert verdicts[-1].state_reset and verdicts[-1].seq == back.seq
    assert {e.outcome for e in scanner.closed_episodes} == {"expired"}
    assert scanner.stats.resets == 1
