"""Worker lifecycle on the real broker: a restarted worker recovers every session from the
changelog and continues where it was; `session_end` and idle expiry write tombstones."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from loopwatch.streams.worker.record import SessionRecord
from tests.integration.worker_harness import (
    WorkerEnv,
    WorkerProcess,
    consume,
    event_records,
    failover_deadline,
    produce,
    until_worker_clock_passes,
    verdict_key,
)
from tests.support.builders import SessionBuilder

pytestmark = pytest.mark.kafka

TTL = 2
"""LOOPWATCH_SESSION_TTL_SECONDS of the sweep tests: it must pass in the worker's time."""


def _repeat(b: SessionBuilder) -> list[Any]:
    return [b.step(("read_file", {"path": "main.py"})), b.result(result="same text")]


async def _verdicts(
    env: WorkerEnv, count: int, deadline: float = 90.0
) -> dict[tuple[str, int], dict[str, Any]]:
    # Distinct (session, seq): after a crash, replayed events may resend identical verdicts.
    records = await consume(
        env.bootstrap, env.verdicts, until=count, distinct=verdict_key, deadline=deadline
    )
    verdicts: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        verdict = json.loads(record.value)
        earlier = verdicts.setdefault(verdict_key(record), verdict)
        assert {**earlier, "evaluated_at": None} == {**verdict, "evaluated_at": None}
    return verdicts


@pytest.mark.parametrize(
    "stop_signal",
    [signal.SIGTERM, signal.SIGKILL],
    ids=["term", "kill"],
)
async def test_restarted_worker_warns_on_the_third_repeat(
    kafka_bootstrap: str, tmp_path: Path, stop_signal: int
) -> None:
    # One worker id for both runs (static membership): the second takes the partitions
    # back at once instead of waiting for the group to drop the first.
    env = WorkerEnv.unique(kafka_bootstrap, extra=(("LOOPWATCH_WORKER_ID", "restarting"),))
    await env.create_topics()
    b = SessionBuilder("restart-1")
    first = [b.user("fix it"), *_repeat(b), *_repeat(b)]
    other = SessionBuilder("restart-2")  # a second session, in whatever partition it lands
    first += [other.user(), *_repeat(other), *_repeat(other)]

    worker = WorkerProcess(env, tmp_path, "first")
    try:
        await produce(kafka_bootstrap, env.events, event_records(first))
        before = await _verdicts(env, len(first))
        assert len(before) == len(first), worker.log()[-3000:]
        assert not any(v["warning"] for v in before.values())
    finally:
        worker.stop(stop_signal)

    third = _repeat(b) + _repeat(other)
    worker = WorkerProcess(env, tmp_path, "second")
    try:
        await produce(kafka_bootstrap, env.events, event_records(third))
        after = await _verdicts(env, len(first) + len(third), failover_deadline(env.settings()))
    finally:
        worker.stop()
    log = worker.log()
    for event in (third[1], third[3]):  # the repeated results of each session
        verdict = after.get((event.session_id, event.seq))
        assert verdict is not None, log[-3000:]
        assert verdict["warning"] is not None, log[-3000:]
        assert verdict["warning"]["count"] == 3
    # Nothing that was processed before the stop got a different verdict afterwards.
    for key, verdict in before.items():
        assert {**after[key], "evaluated_at": None} == {**verdict, "evaluated_at": None}


async def test_session_end_and_idle_expiry_write_tombstones(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = WorkerEnv.unique(
        kafka_bootstrap, partitions=1, extra=(("LOOPWATCH_SESSION_TTL_SECONDS", str(TTL)),)
    )
    await env.create_topics()
    ended = SessionBuilder("ends")
    idle = SessionBuilder("idles")
    busy = SessionBuilder("busy")
    events = [ended.user(), ended.end(), idle.user(), busy.user()]

    worker = WorkerProcess(env, tmp_path)
    try:
        await produce(kafka_bootstrap, env.events, event_records(events))
        verdicts = await _verdicts(env, len(events))
        assert len(verdicts) == len(events), worker.log()[-3000:]
        # The idle session is swept once the TTL passed on the log and the worker's clock.
        await until_worker_clock_passes(verdicts[("idles", 0)], TTL + 0.5)
        later = busy.user()
        await produce(kafka_bootstrap, env.events, event_records([later]))
        assert len(await _verdicts(env, len(events) + 1)) == len(events) + 1
    finally:
        # A graceful stop commits, and each commit first writes the sessions' newest
        # records (one per session per commit): the changelog is complete after it.
        assert worker.stop() == 0
    newest: dict[bytes, bytes | None] = {}
    for record in await _changelog_to_end(env):
        newest[record.key] = record.value
    # Ended and expired sessions have no live value (a tombstone, or never written when
    # they ended within one commit); the busy session holds its newest record.
    assert newest.get(b"ends") is None
    assert newest.get(b"idles") is None
    busy_value = newest[b"busy"]
    assert busy_value is not None
    assert SessionRecord.decode(busy_value).last_seq == later.seq


async def _changelog_to_end(env: WorkerEnv) -> list[Any]:
    """Every changelog record, from the beginning to the end offsets as of now."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=env.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(env.changelog, p) for p in range(env.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        received: list[Any] = []
        async with asyncio.timeout(30):
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                batches = await consumer.getmany(*tps, timeout_ms=1000)
                for batch in batches.values():
                    received.extend(batch)
        return received
    finally:
        await consumer.stop()


async def test_recovered_worker_keeps_ended_and_expired_sessions_gone(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = WorkerEnv.unique(kafka_bootstrap, partitions=1)
    await env.create_topics()
    b = SessionBuilder("gone")
    events = [b.user(), *_repeat(b), *_repeat(b), b.end()]
    worker = WorkerProcess(env, tmp_path, "first")
    try:
        await produce(kafka_bootstrap, env.events, event_records(events))
        assert len(await _verdicts(env, len(events))) == len(events)
    finally:
        worker.stop()

    # After the restart the session starts afresh: a third repeat with a new seq is the
    # first of a new history, so no warning.
    b.seq += 10
    later = [b.user(), *_repeat(b)]
    worker = WorkerProcess(env, tmp_path, "second")
    try:
        await produce(kafka_bootstrap, env.events, event_records(later))
        verdicts = await _verdicts(env, len(events) + len(later))
    finally:
        worker.stop()
    assert all(verdicts[("gone", e.seq)]["warning"] is None for e in later), worker.log()[-2000:]
