"""Standby replicas (`LOOPWATCH_STANDBY_REPLICAS=1`) on the real broker, `rocksdb://`: each
of two workers keeps the other's partition of the sessions table up to date in its own
RocksDB (faust applies a standby's records in batches of 1,000, and whatever it holds at a
rebalance), and when one is killed the survivor takes its partition over from the offset
its standby holds, not from the changelog's start, continuing every session."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from loopwatch.models import AgentEvent
from tests.integration.test_worker_rocksdb import (
    _changelog,
    _check_warned_third_time,
    _partition_db,
    _recovery_starts,
    _repeat,
    _rocksdb_env,
    _verdicts,
)
from tests.integration.worker_harness import WorkerEnv, WorkerProcess, event_records, produce
from tests.support.builders import SessionBuilder

pytestmark = pytest.mark.kafka


def _partitions(worker: WorkerProcess) -> set[int]:
    status, document = worker.get("/ready")
    return set(document["partitions"]) if status == 200 else set()


async def test_the_survivor_takes_over_from_its_standby(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    base = WorkerEnv.unique(
        kafka_bootstrap, partitions=2, extra=(("LOOPWATCH_STANDBY_REPLICAS", "1"),)
    )
    await base.create_topics()
    dirs = {name: tmp_path / f"data-{name}" for name in ("first", "second")}
    workers = {
        name: WorkerProcess(_rocksdb_env(base, path), tmp_path, name, worker_id=name)
        for name, path in dirs.items()
    }
    first, second = workers["first"], workers["second"]
    sessions = [SessionBuilder(f"standby-{n}") for n in range(8)]  # on both partitions
    before: list[AgentEvent] = []
    for b in sessions:
        before += [b.user("fix it"), *_repeat(b), *_repeat(b)]
    try:
        end = time.monotonic() + 120
        while not (_partitions(first) and _partitions(second)):  # each got one
            assert time.monotonic() < end, (first.log()[-2000:], second.log()[-2000:])
            time.sleep(0.2)  # polling the probes against a deadline
        (moved,) = _partitions(first)
        await produce(kafka_bootstrap, base.events, event_records(before))
        assert len(await _verdicts(base, len(before))) == len(before)

        # the sessions reach the changelog (and the standby) at the workers' next commit
        end = time.monotonic() + 60
        changelog = await _changelog(base)
        while sum(len(keys) for _, keys in changelog.values()) < len(sessions):
            assert time.monotonic() < end, changelog
            changelog = await _changelog(base)
        assert changelog[moved][1], "sessions on the partition that moves"
        assert _partition_db(dirs["second"], moved).is_dir(), "the standby's database"

        first.stop(signal.SIGKILL)
        after: list[AgentEvent] = []
        for b in sessions:
            after += _repeat(b)
        await produce(kafka_bootstrap, base.events, event_records(after))
        verdicts = await _verdicts(base, len(before) + len(after))
    finally:
        for worker in workers.values():
            worker.stop(signal.SIGTERM)
    log = second.log()
    _check_warned_third_time(verdicts, after, log)
    # the survivor's recovery of the moved partition began where its standby was (faust
    # applies a standby's records in batches, and what it holds at a rebalance), not at
    # the changelog's start (-1)
    assert _recovery_starts(log, base.changelog)[moved] >= changelog[moved][0], log[-3000:]
