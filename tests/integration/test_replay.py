"""`loopwatch replay` against a live worker on the real broker, and the issue-32
experiment: sessions stamped two days ago, published beside fresh traffic on the same
partitions, get exactly `loopwatch scan`'s warnings (docs/contract.md §8.5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner

from loopwatch.models import AgentEvent
from tests.integration.worker_harness import WorkerEnv, WorkerProcess
from tests.support.builders import SessionBuilder
from tests.support.shared_data import REPO_ROOT, trajectory_files

pytestmark = pytest.mark.asyncio


def loopwatch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO_ROOT,
    )


def _scan_warnings(path: Path) -> list[tuple[str, int, str]]:
    scanned = loopwatch("scan", "--warnings-only", str(path), env={})
    assert scanned.returncode == 0, scanned.stderr
    verdicts = [json.loads(line) for line in scanned.stdout.splitlines()]
    return sorted((v["session_id"], v["seq"], v["warning"]["rule"]) for v in verdicts)


def _matched(stdout: str) -> dict[str, str]:
    """Session id (without the run tag) → match/mismatch/incomplete, from replay's lines."""
    outcomes = {}
    for line in stdout.splitlines():
        outcome, session = line.split()[:2]
        outcomes[session.rpartition("@")[0] or session] = outcome
    return outcomes


@pytest.mark.shared
async def test_the_shared_trajectories_replayed_live_give_exactly_scans_warnings(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    files = trajectory_files()
    env = WorkerEnv.unique(kafka_bootstrap, partitions=3)
    await env.create_topics()
    worker = WorkerProcess(env, tmp_path)
    try:
        replayed = loopwatch(
            "replay", "--rate", "4000", "--deadline", "180", *map(str, files),
            env=env.env(worker.web_port),
        )  # fmt: skip
    finally:
        worker.stop()
    assert replayed.returncode == 0, replayed.stderr[-3000:] + worker.log_excerpt()
    outcomes = _matched(replayed.stdout)
    scanned = {session for file in files for session, _, _ in _scan_warnings(file)}
    assert set(outcomes.values()) == {"match"}
    assert scanned <= set(outcomes)  # the sessions scan warns about were compared
    assert len(outcomes) == 222  # every session of the two files
    # The summary counts the same warnings live as scan finds (5 in the seed data).
    expected = sum(len(_scan_warnings(file)) for file in files)
    assert f"{expected} warnings live, {expected} in scan" in replayed.stderr


def _cyclic(session_id: str, start: datetime) -> list[AgentEvent]:
    """One cyclic session (the same read, the same result, four times): warns in seed."""
    b = SessionBuilder(session_id)
    b.user("fix the bug")
    for _ in range(4):
        b.step(("read_file", {"path": "a.py"}))
        b.result(result="same text")
    shift = start - b.events[0].ts
    return [event.model_copy(update={"ts": event.ts + shift}) for event in b.events]


async def test_two_day_old_copies_beside_fresh_traffic_get_scans_warnings(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The issue's experiment: 24 copies of one cyclic session stamped two days ago,
    published to a running worker among fresh sessions on the same partitions (fresh
    traffic first, so every partition's clock is at now). Before contract 1.2 the copies
    on partitions with fresh traffic were expired before each of their events."""
    now = datetime.now(UTC)
    fresh = [_cyclic(f"fresh-{n}", now - timedelta(minutes=1)) for n in range(12)]
    old = [_cyclic(f"old-{n}", now - timedelta(days=2)) for n in range(24)]
    partition = DefaultPartitioner()
    on = {"fresh": {partition(f"fresh-{n}".encode(), [0, 1, 2], [0, 1, 2]) for n in range(12)}}
    on["old"] = {partition(f"old-{n}".encode(), [0, 1, 2], [0, 1, 2]) for n in range(24)}
    assert on == {"fresh": {0, 1, 2}, "old": {0, 1, 2}}  # fresh traffic beside every copy
    feed = [e for events in fresh for e in events[:3]]  # every partition sees now first
    rest = [events[3:] for events in fresh] + old
    for step in range(max(len(events) for events in rest)):
        feed.extend(events[step] for events in rest if step < len(events))
    path = tmp_path / "copies.jsonl"
    path.write_text("".join(event.model_dump_json() + "\n" for event in feed))
    scanned = _scan_warnings(path)
    per_copy = [w for w in scanned if w[0] == "old-0"]
    assert len(per_copy) >= 2  # the cyclic session warns offline

    env = WorkerEnv.unique(kafka_bootstrap, partitions=3)
    await env.create_topics()
    worker = WorkerProcess(env, tmp_path)
    try:
        replayed = loopwatch(
            "replay", "--keep-ids", "--rate", "2000", "--deadline", "120", str(path),
            env=env.env(worker.web_port),
        )  # fmt: skip
    finally:
        worker.stop()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr[-3000:]
    outcomes = _matched(replayed.stdout)
    assert {outcomes[f"old-{n}"] for n in range(24)} == {"match"}
    warned = {line.split()[1]: line for line in replayed.stdout.splitlines()}
    assert all(f"warnings={len(per_copy)}" in warned[f"old-{n}"] for n in range(24))
