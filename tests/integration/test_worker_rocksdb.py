"""The worker with its `sessions` table in RocksDB (`LOOPWATCH_STORE=rocksdb://`), on the
real broker: after a graceful stop the local store holds exactly what the changelog holds
(same values, persisted offsets at the changelog's end), a restart on the same data dir
resumes from there and continues every session (its sessions still expire), a restart
on an empty data dir recovers from the changelog alone, and a worker killed (SIGKILL) as
soon as it has done so, its restore written without RocksDB's WAL, leaves the whole
changelog in its store."""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from loopwatch.models import AgentEvent
from tests.integration.worker_harness import (
    WorkerEnv,
    WorkerProcess,
    consume,
    event_records,
    failover_deadline,
    produce,
    scan_verdicts,
    until_worker_clock_passes,
    verdict_key,
    without_clock,
)
from tests.support.builders import SessionBuilder
from tests.support.kafka_broker import in_ci

pytestmark = pytest.mark.kafka

if not in_ci():  # CI installs the rocksdb extra (`make venv`): there a missing one fails
    pytest.importorskip("rocksdict", reason="the rocksdb extra: pip install -e '.[rocksdb]'")
from rocksdict import AccessType, Options, Rdict  # noqa: E402

OFFSET_KEY = b"__faust\0offset__"
"""Where faust's RocksDB store keeps a partition's persisted changelog offset."""


def _rocksdb_env(env: WorkerEnv, data_dir: Path) -> WorkerEnv:
    """The same app id and topics, with the table in RocksDB under `data_dir`."""
    extra = (("LOOPWATCH_STORE", "rocksdb://"), ("LOOPWATCH_DATA_DIR", str(data_dir)))
    return dataclasses.replace(env, extra=env.extra + extra)


def _partition_db(data_dir: Path, partition: int) -> Path:
    # faust: <datadir>/v<app version>/tables/<table>-<partition>.db
    return data_dir / "v1" / "tables" / f"sessions-{partition}.db"


def _repeat(b: SessionBuilder) -> list[AgentEvent]:
    return [b.step(("read_file", {"path": "main.py"})), b.result(result="same text")]


async def _verdicts(env: WorkerEnv, count: int) -> dict[tuple[str, int], dict[str, Any]]:
    records = await consume(env.bootstrap, env.verdicts, until=count, distinct=verdict_key)
    verdicts: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        verdict = without_clock(record.value)
        earlier = verdicts.setdefault(verdict_key(record), verdict)
        assert earlier == verdict, "a resent verdict differs from the first"
    return verdicts


async def _changelog(env: WorkerEnv) -> dict[int, tuple[int | None, dict[bytes, bytes]]]:
    """Per partition: the offset of the newest changelog record (None: empty) and the live
    keys with their newest values (tombstoned keys left out)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=env.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(env.changelog, p) for p in range(env.partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        live: dict[int, dict[bytes, bytes]] = {tp.partition: {} for tp in tps}
        pending = {tp for tp in tps if ends[tp] > 0}
        while pending:
            batches = await consumer.getmany(*pending, timeout_ms=10_000)
            assert batches, f"changelog not read to its end {ends} within 10 s"
            for tp, records in batches.items():
                for record in records:
                    if record.value is None:
                        live[tp.partition].pop(record.key, None)
                    else:
                        live[tp.partition][record.key] = record.value
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
    finally:
        await consumer.stop()
    return {tp.partition: (ends[tp] - 1 if ends[tp] else None, live[tp.partition]) for tp in tps}


def _stored(data_dir: Path, partition: int) -> tuple[int | None, dict[bytes, bytes]]:
    """A stopped worker's RocksDB partition: its persisted offset and its records."""
    path = _partition_db(data_dir, partition)
    assert path.is_dir(), f"no RocksDB at {path}: {sorted(data_dir.rglob('*'))}"
    db = Rdict(str(path), options=Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        items = dict(db.items())
    finally:
        db.close()
    offset = items.pop(OFFSET_KEY, None)
    return (None if offset is None else int(offset)), items


def _recovery_starts(log: str, changelog_topic: str) -> dict[int, int]:
    """Where the worker's recovery began reading each changelog partition, from faust's
    "active offsets at start of reading" log table (-1: from the start; n: after n)."""
    lines = log.splitlines()
    tables = [i for i, line in enumerate(lines) if "Reading Starts At - Active" in line]
    assert tables, "faust logged no recovery start offsets"
    starts: dict[int, int] = {}
    for line in lines[tables[-1] + 1 :]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in (changelog_topic, "〃") and cells[1].isdigit():
            starts[int(cells[1])] = int(cells[2])
        elif starts:
            break
    return starts


def _check_warned_third_time(
    verdicts: dict[tuple[str, int], dict[str, Any]], third: list[AgentEvent], log: str
) -> None:
    for event in third[1::2]:  # the repeated results
        verdict = verdicts.get((event.session_id, event.seq))
        assert verdict is not None, log[-3000:]
        assert verdict["warning"] is not None, log[-3000:]
        assert verdict["warning"]["count"] == 3


# (A hard-killed worker restarted on its data dir passes this test too, but its group
# membership holds the partitions for the 60 s session timeout first: too slow here.)
@pytest.mark.parametrize("restart_dir", ["same", "empty"], ids=["same-dir", "empty-dir"])
async def test_restarted_rocksdb_worker_warns_on_the_third_repeat(
    kafka_bootstrap: str, tmp_path: Path, restart_dir: str
) -> None:
    base = WorkerEnv.unique(kafka_bootstrap)
    first_dir = tmp_path / "data-first"
    env = _rocksdb_env(base, first_dir)
    await env.create_topics()
    sessions = [SessionBuilder("rocks-1"), SessionBuilder("rocks-2"), SessionBuilder("rocks-3")]
    first: list[AgentEvent] = []
    for b in sessions:
        first += [b.user("fix it"), *_repeat(b), *_repeat(b)]

    worker = WorkerProcess(env, tmp_path, "first")
    try:
        await produce(kafka_bootstrap, env.events, event_records(first))
        before = await _verdicts(env, len(first))
        assert len(before) == len(first), worker.log()[-3000:]
    finally:
        code = worker.stop(signal.SIGTERM)
    assert code == 0, worker.log()[-3000:]
    assert not any(v["warning"] for v in before.values())

    changelog = await _changelog(env)
    assert sum(len(keys) for _, keys in changelog.values()) == len(sessions)
    # Stopped gracefully: each partition's RocksDB holds the changelog's newest value of
    # every live key, and knows it holds the changelog up to its last record.
    for partition, (last_offset, live) in changelog.items():
        assert _stored(first_dir, partition) == (last_offset, live), f"partition {partition}"
    last_offsets = {p: -1 if last is None else last for p, (last, _) in changelog.items()}

    second_dir = first_dir if restart_dir == "same" else tmp_path / "data-second"
    env = _rocksdb_env(base, second_dir)
    third: list[AgentEvent] = []
    for b in sessions:
        third += _repeat(b)
    worker = WorkerProcess(env, tmp_path, "second")
    try:
        await produce(kafka_bootstrap, env.events, event_records(third))
        after = await _verdicts(env, len(first) + len(third))
    finally:
        code = worker.stop(signal.SIGTERM)
    log = worker.log()
    assert code == 0, log[-3000:]
    _check_warned_third_time(after, third, log)
    assert after == scan_verdicts(first + third), log[-3000:]
    for partition in range(env.partitions):
        assert _partition_db(second_dir, partition).is_dir()
    # Where recovery began reading the changelog: on the same data dir after the last
    # record (the store held them all, nothing replayed); on an empty one at its start.
    starts = _recovery_starts(log, env.changelog)
    assert starts == (last_offsets if restart_dir == "same" else dict.fromkeys(starts, -1))
    assert starts.keys() == last_offsets.keys()


async def test_sessions_kept_in_rocksdb_still_expire_after_a_restart(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    ttl = 2
    env = _rocksdb_env(
        WorkerEnv.unique(
            kafka_bootstrap, partitions=1, extra=(("LOOPWATCH_SESSION_TTL_SECONDS", str(ttl)),)
        ),
        data_dir,
    )
    await env.create_topics()
    idle = SessionBuilder("idles")
    busy = SessionBuilder("busy")
    first = [idle.user(), busy.user()]
    worker = WorkerProcess(env, tmp_path, "first")
    try:
        await produce(kafka_bootstrap, env.events, event_records(first))
        verdicts = await _verdicts(env, len(first))
    finally:
        code = worker.stop(signal.SIGTERM)
    assert (code, len(verdicts)) == (0, len(first)), worker.log()[-3000:]
    last_offset, live = (await _changelog(env))[0]
    assert set(live) == {b"idles", b"busy"}

    # Restarted on the same data dir, the worker replays no changelog record: its idle
    # session is known from RocksDB alone (with when it was last seen, on the log and the
    # worker's clock), and must still expire once the TTL has passed on both.
    raw = await consume(env.bootstrap, env.verdicts, until=len(first))
    idle_verdict = next(json.loads(r.value) for r in raw if r.key == b"idles")
    await until_worker_clock_passes(idle_verdict, ttl + 0.5)
    later = [busy.user()]
    worker = WorkerProcess(env, tmp_path, "second")
    try:
        await produce(kafka_bootstrap, env.events, event_records(later))
        verdicts = await _verdicts(env, len(first) + len(later))
    finally:
        code = worker.stop(signal.SIGTERM)
    log = worker.log()
    assert (code, len(verdicts)) == (0, len(first) + len(later)), log[-3000:]
    assert _recovery_starts(log, env.changelog) == {0: last_offset}
    last_offset, live = (await _changelog(env))[0]
    assert set(live) == {b"busy"}, "the idle session was not deleted: " + log[-3000:]
    assert _stored(data_dir, 0) == (last_offset, live)


async def test_a_worker_killed_right_after_restoring_without_local_state_keeps_it(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The restore writes RocksDB without its WAL (`faust_ext.rocksdb_restore`) and flushes
    once recovery completes: a worker SIGKILLed as soon as it is ready, after restoring
    from the changelog alone, leaves a store that holds the whole changelog, from which
    the next worker resumes (replaying nothing) and continues every session."""
    base = WorkerEnv.unique(kafka_bootstrap)
    env = _rocksdb_env(base, tmp_path / "data-first")
    await env.create_topics()
    sessions = [SessionBuilder(f"restored-{i}") for i in range(12)]
    first: list[AgentEvent] = []
    for b in sessions:
        first += [b.user("fix it"), *_repeat(b), *_repeat(b)]
    worker = WorkerProcess(env, tmp_path, "first")
    try:
        await produce(kafka_bootstrap, env.events, event_records(first))
        before = await _verdicts(env, len(first))
        assert len(before) == len(first), worker.log()[-3000:]
    finally:
        code = worker.stop(signal.SIGTERM)
    assert code == 0, worker.log()[-3000:]
    changelog = await _changelog(env)
    assert sum(len(keys) for _, keys in changelog.values()) == len(sessions)

    restored_dir = tmp_path / "data-restored"  # empty: everything from the changelog
    env = _rocksdb_env(base, restored_dir)
    worker = WorkerProcess(env, tmp_path, "restoring")
    try:
        await worker.wait_ready(failover_deadline(env.settings()))
    finally:
        code = worker.stop(signal.SIGKILL)  # no goodbye, no flush of its own
    assert code == -signal.SIGKILL, worker.log()[-3000:]
    for partition, (last_offset, live) in changelog.items():
        assert _stored(restored_dir, partition) == (last_offset, live), worker.log()[-3000:]
    last_offsets = {p: -1 if last is None else last for p, (last, _) in changelog.items()}

    third: list[AgentEvent] = []
    for b in sessions:
        third += _repeat(b)
    worker = WorkerProcess(env, tmp_path, "after-kill")
    try:
        await produce(kafka_bootstrap, env.events, event_records(third))
        # (the killed member holds its partitions until the group's session timeout)
        after = await _verdicts(env, len(first) + len(third))
    finally:
        code = worker.stop(signal.SIGTERM)
    log = worker.log()
    assert code == 0, log[-3000:]
    _check_warned_third_time(after, third, log)
    assert after == scan_verdicts(first + third), log[-3000:]
    assert _recovery_starts(log, env.changelog) == last_offsets
