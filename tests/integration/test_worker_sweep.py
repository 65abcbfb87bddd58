"""A mass expiry on the real broker (issue 33, item 6): with many sessions due at once, the
record that finds them due deletes only a step of them, an unrelated event right behind it
gets its verdict before the rest are deleted, and the worker deletes the rest without any
further record. Read from the changelog's order (one partition): the probe's record comes
after a step's tombstones, not after all of them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from loopwatch.streams.worker.pipeline import SWEEP_PER_STEP
from tests.integration.worker_harness import (
    WorkerEnv,
    WorkerProcess,
    consume,
    event_records,
    produce,
    until_worker_clock_passes,
    verdict_key,
)
from tests.support.builders import SessionBuilder

pytestmark = pytest.mark.kafka

TTL = 5
"""LOOPWATCH_SESSION_TTL_SECONDS: longer than the load takes, so nothing is swept before
the trigger."""
DUE = 40 * SWEEP_PER_STEP
STRAY_STEPS = 3
"""Sweep steps the worker may run between the trigger's and the probe's records (they are
fetched together; a loop turn between them would let a step in)."""


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_mass_expiry_goes_in_steps_behind_other_events(
    kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    """exactly_once writes no deferred state: the worker's steps delete from the table
    outside any record, inside the partition's open transaction."""
    env = WorkerEnv.unique(
        kafka_bootstrap,
        partitions=1,
        extra=(
            ("LOOPWATCH_SESSION_TTL_SECONDS", str(TTL)),
            ("LOOPWATCH_PROCESSING_GUARANTEE", guarantee),
        ),
    )
    await env.create_topics()
    idle = [SessionBuilder(f"idle-{n:05d}").user() for n in range(DUE)]

    worker = WorkerProcess(env, tmp_path)
    try:
        await produce(kafka_bootstrap, env.events, event_records(idle))
        loaded = await consume(
            kafka_bootstrap, env.verdicts, until=DUE, distinct=verdict_key, deadline=120
        )
        assert len({verdict_key(r) for r in loaded}) == DUE, worker.log_excerpt()
        newest = max(json.loads(r.value)["evaluated_at"] for r in loaded)
        await until_worker_clock_passes({"evaluated_at": newest}, TTL + 0.5)
        # the trigger finds every idle session due; the probe is right behind it, in
        # the same batch
        trigger, probe = SessionBuilder("trigger").user(), SessionBuilder("probe").user()
        await _produce_together(kafka_bootstrap, env.events, event_records([trigger, probe]))
        # no record after these: the worker must finish the sweep on its own
        changelog = await _changelog_until_tombstones(env, DUE, "read_uncommitted", 120)
        if guarantee == "exactly_once":
            # faust commits a transaction with an offset commit, and that only when offsets
            # moved: the steps after the last record stay in the open transaction until
            # another event (docs/worker.md, exactly_once). One more event commits them.
            nudge = SessionBuilder("nudge").user()
            await produce(kafka_bootstrap, env.events, event_records([nudge]))
            changelog = await _changelog_until_tombstones(env, DUE, "read_committed", 120)
    finally:
        assert worker.stop() == 0, worker.log_excerpt()

    keys = [(record.key, record.value is None) for record in changelog]
    at_trigger = keys.index((b"trigger", False))
    at_probe = keys.index((b"probe", False))
    tombstones = [i for i, (_, deleted) in enumerate(keys) if deleted]
    assert len(tombstones) == DUE
    assert {keys[i][0] for i in tombstones} == {e.session_id.encode() for e in idle}
    assert tombstones[0] > at_trigger  # nothing went before the trigger
    before_probe = sum(1 for i in tombstones if i < at_probe)
    # the trigger's own step, and at most a few of the worker's: not the whole partition
    assert SWEEP_PER_STEP <= before_probe <= (1 + STRAY_STEPS) * SWEEP_PER_STEP, before_probe


async def _produce_together(bootstrap: str, topic: str, records: Any) -> None:
    """Records in one batch to partition 0 (fetched together)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        batch = producer.create_batch()
        for key, value in records:
            assert batch.append(key=key, value=value, timestamp=None) is not None
        await (await producer.send_batch(batch, topic, partition=0))
    finally:
        await producer.stop()


async def _changelog_until_tombstones(
    env: WorkerEnv, count: int, isolation_level: str, deadline: float
) -> list[Any]:
    """The changelog from its start until it holds `count` tombstones (read_committed:
    what exactly_once's transactions committed; read_uncommitted: what was written)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=env.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation_level,
    )
    await consumer.start()
    try:
        tp = TopicPartition(env.changelog, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        received: list[Any] = []
        async with asyncio.timeout(deadline):
            while sum(1 for r in received if r.value is None) < count:
                batches = await consumer.getmany(tp, timeout_ms=1000)
                received.extend(batches.get(tp, []))
        return received
    finally:
        await consumer.stop()
