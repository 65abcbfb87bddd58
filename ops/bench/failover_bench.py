"""Fail-over benchmark: time from a kill -9 of a worker to the first new verdict of each
partition, on a real broker. Prints figures.

    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 .venv/bin/python ops/bench/failover_bench.py \
        [--mode restart|takeover|both] [--kills 5] [--partitions 6] [--store memory://] \
        [--dynamic]

One session per partition gets an event every `--interval` seconds (a paced producer),
so a partition that processes again shows a new verdict within one interval.
* restart: one worker; kill -9, then a new worker at once with the same LOOPWATCH_WORKER_ID
  (the restart-in-place of a supervisor or a Kubernetes pod).
* takeover: two workers; kill -9 one of them and leave it dead until every partition has
  a new verdict (the survivor took over), then start it again and let the group settle.
For each kill: per partition, the seconds from the kill to the first verdict of an event
that had no verdict before the kill; then min/median/max over all partitions and kills,
and the worst partition of each kill (when the last partition resumed).
`--dynamic` runs without LOOPWATCH_WORKER_ID (no static membership), for comparison.
Each run uses topics and an app id of its own; the session timeouts are the worker's
defaults unless LOOPWATCH_SESSION_TIMEOUT_MS etc. are set in the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from core_bench import machine  # noqa: E402
from harness import worker_env  # noqa: E402
from partition_probes import PartitionProbes  # noqa: E402

from loopwatch.streams.demo.worker_process import WorkerProcess  # noqa: E402
from loopwatch.streams.kafka.admin import create_topics  # noqa: E402
from loopwatch.streams.settings import Settings  # noqa: E402

SETTLE_SECONDS = 5.0
"""After a worker (re)joins: let the group settle before the next kill (a bench pause)."""


class Bench:
    def __init__(self, args: argparse.Namespace, bootstrap: str, workdir: Path) -> None:
        self.args = args
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.prefix = f"lw-failover-{uuid.uuid4().hex[:8]}"
        settings = Settings.from_env(self.env("a"))
        self.probes = PartitionProbes(
            bootstrap,
            settings.events_topic,
            settings.verdicts_topic,
            partitions=args.partitions,
            interval=args.interval,
        )
        self.workers: dict[str, WorkerProcess] = {}
        self.starts: dict[str, int] = {}

    def env(self, name: str) -> dict[str, str]:
        env = worker_env(self.bootstrap, self.prefix, self.args.partitions)
        env["LOOPWATCH_STORE"] = self.args.store
        env["LOOPWATCH_DATA_DIR"] = str(self.workdir / f"data-{name}")
        if not self.args.dynamic:
            env["LOOPWATCH_WORKER_ID"] = f"bench-{name}"
        return env

    @property
    def settings(self) -> Settings:
        return Settings.from_env(self.env("a"))

    def start(self, name: str) -> None:
        self.starts[name] = self.starts.get(name, 0) + 1
        env = self.env(name)
        log = self.workdir / f"{name}-{self.starts[name]}.log"
        worker = WorkerProcess(Settings.from_env(env), log, env=env, cwd=REPO)
        worker.start()
        self.workers[name] = worker

    def kill(self, name: str) -> None:
        self.workers.pop(name).stop(signal.SIGKILL)  # no goodbye to the group, no flush

    def stop_all(self) -> None:
        for worker in self.workers.values():
            worker.stop(timeout=60)
        self.workers.clear()

    async def measure_kill(self, victim: str) -> list[float | None]:
        kill = time.monotonic()
        first_seq = self.probes.seq + 1  # the first round of events produced after the kill
        self.kill(victim)
        if self.args.mode_now == "restart":
            self.start(victim)
        resumed = await self.probes.all_partitions_after(kill, first_seq, self.args.deadline)
        times = [self.probes.first_after(kill, first_seq, p) for p in range(self.args.partitions)]
        if not resumed:
            print(f"    not every partition resumed within {self.args.deadline:.0f} s")
            for name in self.workers:
                log = self.workdir / f"{name}-{self.starts[name]}.log"
                print(f"    {log.name}, last lines:")
                print(
                    "      " + "\n      ".join(log.read_text(errors="replace").splitlines()[-15:])
                )
        if self.args.mode_now == "takeover":
            self.start(victim)  # back again: the next kill starts from two workers
        return times

    async def run_mode(self, mode: str) -> list[list[float | None]]:
        self.args.mode_now = mode
        names = ["a"] if mode == "restart" else ["a", "b"]
        for name in names:
            self.start(name)
        if not await self.probes.all_partitions_after(time.monotonic(), self.probes.seq + 1, 120):
            raise SystemExit(f"{mode}: the workers did not start processing within 120 s")
        kills: list[list[float | None]] = []
        for n in range(self.args.kills):
            await asyncio.sleep(SETTLE_SECONDS)  # a bench pause: let the group settle
            times = await self.measure_kill(names[n % len(names)])
            kills.append(times)
            shown = " ".join("-" if t is None else f"{t:.1f}" for t in times)
            print(f"  {mode} kill {n + 1}: per partition (s): {shown}")
            await self.probes.all_partitions_after(time.monotonic(), self.probes.seq + 1, 120)
        self.stop_all()
        return kills


def report(mode: str, kills: list[list[float | None]]) -> None:
    every = [t for times in kills for t in times if t is not None]
    missing = sum(t is None for times in kills for t in times)
    worst = [max(t for t in times if t is not None) for times in kills if any(times)]
    print(f"{mode}: {len(kills)} kills x {len(kills[0])} partitions")
    if every:
        print(
            f"  per partition: min {min(every):.1f} s, median {statistics.median(every):.1f} s, "
            f"max {max(every):.1f} s"
        )
        print(
            f"  last partition of each kill: min {min(worst):.1f} s, "
            f"median {statistics.median(worst):.1f} s, max {max(worst):.1f} s"
        )
    if missing:
        print(f"  {missing} partition(s) did not resume within the deadline")


async def main_async(args: argparse.Namespace) -> None:
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    with tempfile.TemporaryDirectory(prefix="lw-failover-") as tmp:
        workdir = Path(args.logs or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        bench = Bench(args, bootstrap, workdir)
        settings = bench.settings
        await create_topics(settings)
        print(f"machine: {machine()}; load {os.getloadavg()[0]:.2f} at start")
        print(
            f"store {args.store}, {args.partitions} partitions, event every "
            f"{args.interval * 1000:.0f} ms per partition, "
            f"{'dynamic membership' if args.dynamic else 'static membership (worker ids)'}, "
            f"session timeout {settings.session_timeout_ms} ms, heartbeat "
            f"{settings.heartbeat_interval_ms} ms, rebalance timeout "
            f"{settings.rebalance_timeout_ms} ms"
        )
        results: dict[str, list[list[float | None]]] = {}
        async with bench.probes.running(settings.verdict_partitions):
            try:
                modes = ["restart", "takeover"] if args.mode == "both" else [args.mode]
                for mode in modes:
                    results[mode] = await bench.run_mode(mode)
            finally:
                bench.stop_all()
        for mode, kills in results.items():
            report(mode, kills)
        print(f"load {os.getloadavg()[0]:.2f} at the end (1-minute average)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("restart", "takeover", "both"), default="both")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between events")
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--dynamic", action="store_true", help="no LOOPWATCH_WORKER_ID")
    parser.add_argument("--logs", help="keep the workers' logs and data in this directory")
    parser.add_argument("--deadline", type=float, default=120.0, help="per kill, seconds")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
