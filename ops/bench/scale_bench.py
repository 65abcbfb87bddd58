"""Scale benchmark: what N open sessions cost one worker, and how fast it comes back.

    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 .venv/bin/python ops/bench/scale_bench.py \
        [--sessions 10000] [--events-per-session 20] [--store rocksdb://|memory://] \
        [--partitions 4] [--burst 20000] [--skip-recovery] [--tree CHECKOUT]

On a real broker, with topics and an app id of its own, one worker (static membership,
so that a restart takes its partitions back at once) is loaded with `--sessions` open
sessions of `--events-per-session` events each (synthetic coding-agent sessions, their
`session_end` left out so that every session stays open). Printed, each with the load:

* load: events/s from the first to the last verdict of the load;
* state: the worker's RSS per open session, its RocksDB bytes (`rocksdb://`), the
  changelog's records and bytes on the broker's disk per session and per event;
* hot vs cold: `--burst` events over 100 sessions (hot: their state is in the caches)
  against the same count spread one per session over the open sessions (cold);
* recovery after `kill -9`: seconds until the restarted worker is ready and until the
  first verdict of an event produced after the kill, for a restart on the same data dir
  (`rocksdb://`: only the changelog's tail is read) and on an empty one (the whole
  changelog), with the records it restored (its `/ready`).

Figures swing with what else runs on the machine: compare runs of one invocation, or
against `--sessions 100` in the same run, and read the load line printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from harness import (  # noqa: E402
    collect,
    delete_run_topics,
    local_broker_dir,
    new_prefix,
    produce_batched,
    start_worker,
    worker_env,
)
from synth import generate  # noqa: E402

from loopwatch.streams.kafka.admin import create_topics  # noqa: E402
from loopwatch.streams.settings import Settings  # noqa: E402

HOT_SESSIONS = 100


def open_sessions(sessions: int, per_session: int, seed: int) -> list[tuple[bytes, bytes]]:
    """`sessions` interleaved synthetic sessions, none ended."""
    lines = []
    for event in generate(sessions, sessions * per_session, seed):
        if event["type"] != "session_end":
            lines.append((event["session_id"].encode(), json.dumps(event).encode()))
    return lines


def continued(sessions: int, count: int, seed: int, offset: int) -> list[tuple[bytes, bytes]]:
    """`count` user messages, one per session in turn over `sessions` of the open ones
    (`synth-<seed>-NNNNN`), each after that session's last `seq` (+`offset`)."""
    lines = []
    for n in range(count):
        session = f"synth-{seed}-{n % sessions:05d}"
        event = {
            "v": 1,
            "session_id": session,
            "agent_id": "scale-bench",
            "seq": 100_000 + offset + n // sessions,
            "ts": "2026-12-02T12:00:00+00:00",
            "type": "user_message",
            "text": f"go on ({n})",
        }
        lines.append((session.encode(), json.dumps(event).encode()))
    return lines


def _probe_event(session: str) -> tuple[bytes, bytes]:
    event = {
        "v": 1,
        "session_id": session,
        "agent_id": "scale-bench",
        "seq": 0,
        "ts": "2026-12-02T12:00:00+00:00",
        "type": "user_message",
        "text": "are you back?",
    }
    return session.encode(), json.dumps(event).encode()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):  # a missing or vanishing directory counts 0
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += (Path(root) / name).stat().st_size
    return total


def changelog_bytes(bootstrap: str, topic: str) -> int:
    """The changelog's partitions on the local broker's disk (kafka.sh's data dir)."""
    logs = local_broker_dir(bootstrap) / "kraft"  # kafka.sh's log.dirs
    return sum(dir_bytes(logs / f"{topic}-{p}") for p in range(64))


def load_line() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min) {five:.2f} (5 min) on {os.cpu_count()} cores"


class Run:
    def __init__(self, args: argparse.Namespace, bootstrap: str, workdir: Path) -> None:
        self.args = args
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.env = worker_env(bootstrap, new_prefix(), args.partitions)
        self.env.update(
            LOOPWATCH_STORE=args.store,
            LOOPWATCH_WORKER_ID="scale-0",
            LOOPWATCH_DATA_DIR=str(workdir / "data"),
        )
        self.settings = Settings.from_env(self.env)
        self.produced = 0
        self.worker: Any = None

    def start(self, name: str, tree: str | None = None) -> None:
        tree = tree or self.args.tree
        where = Path(tree).resolve() if tree else REPO
        self.worker = start_worker(self.env, self.workdir / f"{name}.log", None, tree=where)

    async def process(self, lines: list[tuple[bytes, bytes]], deadline: float) -> float:
        """Produce `lines`; events/s from the first to the last of their verdicts."""
        ready = asyncio.Event()
        reader = asyncio.create_task(
            collect(
                self.bootstrap,
                self.settings.verdicts_topic,
                self.settings.verdict_partitions,
                len(lines),
                deadline=deadline,
                ready=ready,
                patient=True,
            )
        )
        await ready.wait()
        await produce_batched(
            self.bootstrap, self.settings.events_topic, lines, self.args.partitions
        )
        got = await reader
        if len(got) < len(lines):
            raise RuntimeError(f"{len(got)} of {len(lines)} verdicts within {deadline} s")
        stamps = sorted(record.timestamp / 1000 for _, record in got)
        return len(lines) / max(1e-6, stamps[-1] - stamps[0])

    async def wait_ready(self, deadline: float) -> tuple[float, int, float]:
        """Seconds until /ready, the most records a recovery said it had to restore, and
        the seconds from the first answer that showed a recovery under way to /ready (the
        restore without the process's start-up; 0.0 if none was seen)."""
        start, most, recovering = time.monotonic(), 0, None
        while time.monotonic() - start < deadline:
            status, document = await asyncio.to_thread(self.worker.get, "/ready")
            document = document or {}  # None: not serving yet
            progress = document.get("recovery") or {}
            if progress and recovering is None:
                recovering = time.monotonic()
            most = max(most, progress.get("to_restore", 0))
            if status == 200 and document.get("ready"):
                now = time.monotonic()
                return now - start, most, 0.0 if recovering is None else now - recovering
            await asyncio.sleep(0.05)  # polling the probe, not synchronisation
        raise RuntimeError(f"not ready within {deadline} s: {self.log_tail()}")

    def log_tail(self) -> str:
        return self.worker.log_path.read_text(errors="replace")[-3000:]

    async def restart(self, name: str, empty: bool, seed: int, tree: str | None = None) -> str:
        self.worker.stop(signal.SIGKILL)
        if empty:
            shutil.rmtree(self.workdir / "data", ignore_errors=True)
        killed = time.monotonic()
        self.start(name, tree)
        ready, restored, restoring = await self.wait_ready(3600)
        rate = ""
        if restored and restoring:
            rate = f" ({restored / restoring:,.0f} records/s over the {restoring:.1f} s restore)"
        # a session of its own: the sessions loaded stay as the loading worker wrote
        # them, for the next restart (another checkout may write another record format)
        probe = [_probe_event(f"probe-{self.produced}")]
        self.produced += 1
        try:
            await self.process(probe, deadline=120)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; the worker's log: {self.log_tail()}") from exc
        first = time.monotonic() - killed
        return (
            f"ready after {ready:.1f} s, first new verdict {first:.1f} s after the kill, "
            f"{restored:,} records restored{rate}"
        )


async def main_async(args: argparse.Namespace) -> None:
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    workdir = Path(args.workdir or f"/tmp/lw-scale-{uuid.uuid4().hex[:6]}")
    workdir.mkdir(parents=True, exist_ok=True)
    run = Run(args, bootstrap, workdir)
    await create_topics(run.settings)
    n, seed = args.sessions, args.seed
    print(f"scale bench: {n:,} open sessions x {args.events_per_session} events, {args.store}, "
          f"{args.partitions} partitions; {load_line()}", flush=True)  # fmt: skip
    load = open_sessions(n, args.events_per_session, seed)
    run.start("worker")
    try:
        await run.wait_ready(300)
        idle_rss = rss_bytes(run.worker.pid)
        rate = await run.process(load, deadline=3600)
        print(f"load: {len(load):,} events at {rate:,.0f} events/s; {load_line()}", flush=True)
        # the sessions reach the changelog and the store at the next commits
        await asyncio.sleep(3 * run.settings.commit_interval_ms / 1000)  # bench pause
        rss = rss_bytes(run.worker.pid)
        rocks = dir_bytes(workdir / "data")
        changelog = changelog_bytes(bootstrap, run.settings.changelog_topic)
        print(
            f"state: RSS {rss / 2**20:,.0f} MiB, {idle_rss / 2**20:,.0f} MiB before the load "
            f"({(rss - idle_rss) / n / 1024:.1f} KiB per open session); "
            f"RocksDB {rocks / 2**20:,.0f} MiB ({rocks / n / 1024:.1f} KiB per session); "
            f"changelog {changelog / 2**20:,.0f} MiB on disk "
            f"({changelog / n / 1024:.2f} KiB per session, {changelog / len(load):,.0f} B "
            "per event, before compaction)",
            flush=True,
        )
        if args.burst:  # (--burst 0: no hot/cold measurement)
            hot = continued(min(HOT_SESSIONS, n), args.burst, seed, offset=0)
            cold = continued(n, args.burst, seed, offset=args.burst)
            run.produced = 2 * args.burst
            hot_rate = await run.process(hot, deadline=1800)
            cold_rate = await run.process(cold, deadline=1800)
            print(
                f"hot ({min(HOT_SESSIONS, n)} sessions): {hot_rate:,.0f} events/s; cold "
                f"(spread over {n:,}): {cold_rate:,.0f} events/s, {cold_rate / hot_rate:.2f}x; "
                f"{load_line()}",
                flush=True,
            )
        if not args.skip_recovery:
            if args.store.startswith("rocksdb"):
                same = await run.restart("restart-same-dir", empty=False, seed=seed)
                print(f"kill -9, restart on its data dir: {same}; {load_line()}", flush=True)
            for round_ in range(args.restore_rounds):
                for tree in [args.tree, *args.restore_also]:
                    name = f"restart-empty-dir-{round_}-{Path(tree or REPO).name}"
                    fresh = await run.restart(name, empty=True, seed=seed, tree=tree)
                    print(
                        f"kill -9, restart without local state ({Path(tree or REPO).name}): "
                        f"{fresh}; {load_line()}",
                        flush=True,
                    )
    finally:
        if run.worker is not None:
            run.worker.stop(signal.SIGTERM)
        await delete_run_topics(bootstrap, args.partitions)
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--events-per-session", type=int, default=20)
    parser.add_argument("--store", default="rocksdb://")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--burst", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--skip-recovery", action="store_true")
    parser.add_argument("--workdir", default=None)
    parser.add_argument(
        "--tree", default=None, help="run the worker of another checkout (an A/B of the code)"
    )
    parser.add_argument(
        "--restore-also",
        action="append",
        default=[],
        metavar="CHECKOUT",
        help="after the restart without local state, restart so with this checkout's worker "
        "too, from the same changelog (an A/B of the restore in one run; repeatable)",
    )
    parser.add_argument(
        "--restore-rounds", type=int, default=1, help="restarts without local state, each tree"
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
