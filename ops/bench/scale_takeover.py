"""`scale_bench.py --takeover`: two workers of one group hold the N open sessions; one is
killed (`kill -9`) and the survivor takes its partitions over, once from a standby it
kept of them and once without (restored from the changelog). Printed per take-over:

* the survivor's standby lag at the kill (`loopwatch_standby_records_behind`);
* kill → rebalance: until the survivor's `/ready` first says not ready (the group
  coordinator noticed the dead member: `LOOPWATCH_SESSION_TIMEOUT_MS`, 10 s by default);
* kill → ready: until the survivor's `/ready` is ready holding every partition;
* kill → first verdict: per partition, of a probe event produced after the kill
  (`partition_probes.PartitionProbes`, one probe session per partition every 0.1 s), for
  the moved partitions and for the survivor's own (they pause for the rebalance);
* the changelog records the survivor read for it (`loopwatch_recovery_records_read_total`
  before and after), and by offset (its `/ready`'s `to_restore`).

Both workers run `rocksdb://`, each with its own `LOOPWATCH_DATA_DIR` and
`LOOPWATCH_WORKER_ID` (static membership; the group's timeouts are the worker's
defaults). The sessions are loaded once, with `LOOPWATCH_STANDBY_REPLICAS=1`; the standby
take-over waits until both standbys have read their changelog partitions to the end. For
the one without, the survivor is stopped cleanly and restarted on its data dir, and the
killed worker's id is restarted on an empty data dir, both with standby replicas 0: once
the two share the partitions (the second one restored its share from the changelog), the
first is killed, and the second, holding nothing of the first's partitions, restores them
from the changelog.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from harness import settled_at, start_worker, worker_partitions
from partition_probes import PartitionProbes
from scale_bench import REPO, Fleet, Run, load_line

from loopwatch.streams.demo.worker_process import WorkerProcess

PROBE_INTERVAL = 0.1
"""Seconds between two probe events of a partition (the resolution of a first verdict)."""
TAKEOVER_DEADLINE = 3600.0
"""Seconds a take-over may take (a restore from the changelog of 100,000s of sessions)."""


@dataclass
class Takeover:
    """What one take-over measured (seconds from the kill)."""

    label: str
    moved: list[int]
    behind: float
    """The survivor's standby lag at the kill (changelog records, by offset)."""
    rebalance: float | None
    ready: float
    moved_first: list[float | None]
    own_first: list[float | None]
    read: float
    """Changelog records the survivor read (its recovery counter's delta)."""
    to_restore: int
    """The records its recoveries said they had to restore, by offset (the largest)."""
    load: str

    def row(self) -> str:
        def span(times: list[float | None]) -> str:
            got = [t for t in times if t is not None]
            missing = f" ({len(times) - len(got)} none)" if len(got) < len(times) else ""
            return (f"{min(got):.1f}-{max(got):.1f}" if got else "-") + missing

        rebalance = "-" if self.rebalance is None else f"{self.rebalance:.1f}"
        return (
            f"| {self.label} | {self.behind:,.0f} | {rebalance} | {self.ready:.1f} | "
            f"{span(self.moved_first)} | {span(self.own_first)} | {self.read:,.0f} | "
            f"{self.to_restore:,} | {self.load} |"
        )


HEADER = (
    "| take-over | standby lag at the kill (records) | kill → rebalance (s) | kill → "
    "ready with all partitions (s) | kill → first verdict, moved partitions (s) | kill → "
    "first verdict, its own partitions (s) | changelog records read | to restore by "
    "offset | load (1 min, 5 min) |\n|---|---|---|---|---|---|---|---|---|"
)


def free_port() -> int:
    """A port nobody listens on now (two workers of one run need two web ports)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Pair:
    """The two workers (`a`, `b`) of `--takeover` over a `Run`'s topics."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.workers: dict[str, WorkerProcess] = {}
        self.tree = Path(run.args.tree).resolve() if run.args.tree else REPO

    def data_dir(self, name: str) -> Path:
        return self.run.workdir / f"data-{name}"

    def start(self, name: str, standbys: int, label: str) -> None:
        env = {
            **self.run.env,
            "LOOPWATCH_WORKER_ID": f"scale-{name}",
            "LOOPWATCH_DATA_DIR": str(self.data_dir(name)),
            "LOOPWATCH_WEB_PORT": str(free_port()),
            "LOOPWATCH_STANDBY_REPLICAS": str(standbys),
        }
        log = self.run.workdir / f"{name}-{label}.log"
        self.workers[name] = start_worker(env, log, None, tree=self.tree)

    def stop_all(self) -> None:
        for worker in self.workers.values():
            worker.stop(signal.SIGTERM, timeout=120)
        self.workers.clear()

    async def settled(self) -> None:
        """Both ready, their partitions splitting all of them."""
        workers = list(self.workers.values())
        await settled_at(workers, self.run.args.partitions, TAKEOVER_DEADLINE)

    async def standbys_caught_up(self, deadline: float) -> tuple[float, float]:
        """Seconds until both workers' standby lag was 0, and the lag then (the smallest
        seen when the deadline passed)."""
        start = time.monotonic()
        least = float("inf")
        while time.monotonic() - start < deadline:
            lags = [
                await asyncio.to_thread(self.run.metric, "loopwatch_standby_records_behind", w)
                for w in self.workers.values()
            ]
            least = min(least, sum(lags))
            if not sum(lags):
                break
            await asyncio.sleep(0.5)  # polling the gauges, not synchronisation
        return time.monotonic() - start, least

    async def survivor_phases(
        self, survivor: WorkerProcess, kill: float
    ) -> tuple[float | None, float, int]:
        """(kill → the survivor's first answer not ready, kill → ready holding every
        partition, the most records its recovery said it had to restore)."""
        every = list(range(self.run.args.partitions))
        rebalance, most = None, 0
        while time.monotonic() - kill < TAKEOVER_DEADLINE:
            status, document = await asyncio.to_thread(survivor.get, "/ready")
            now = time.monotonic()
            document = document or {}
            most = max(most, (document.get("recovery") or {}).get("to_restore", 0))
            if status == 200 and document.get("ready"):
                if sorted(document["partitions"]) == every:
                    return rebalance, now - kill, most
            elif rebalance is None:
                rebalance = now - kill
            await asyncio.sleep(0.05)  # polling the probe, not synchronisation
        raise RuntimeError(f"no take-over within {TAKEOVER_DEADLINE} s")

    async def kill_and_measure(self, victim: str, survivor: str, label: str) -> Takeover:
        run, partitions = self.run, self.run.args.partitions
        alive = self.workers[survivor]
        moved = worker_partitions(self.workers[victim]) or []
        own = worker_partitions(alive) or []
        behind = run.metric("loopwatch_standby_records_behind", alive)
        read_before = run.metric("loopwatch_recovery_records_read_total", alive)
        settings = run.settings
        probes = PartitionProbes(
            run.bootstrap,
            settings.events_topic,
            settings.verdicts_topic,
            partitions=partitions,
            interval=PROBE_INTERVAL,
            prefix=f"takeover-{label.replace(' ', '-')}-",
        )
        async with probes.running(settings.verdict_partitions):
            if not await probes.all_partitions_after(time.monotonic(), 0, 120):
                raise RuntimeError("the probes got no verdict of every partition before the kill")
            first_seq = probes.seq + 1  # the first round of probes produced after the kill
            kill = time.monotonic()
            self.workers.pop(victim).stop(signal.SIGKILL)
            rebalance, ready, to_restore = await self.survivor_phases(alive, kill)
            await probes.all_partitions_after(kill, first_seq, TAKEOVER_DEADLINE)
            firsts = {p: probes.first_after(kill, first_seq, p) for p in range(partitions)}
        read = run.metric("loopwatch_recovery_records_read_total", alive) - read_before
        return Takeover(
            label=label,
            moved=moved,
            behind=behind,
            rebalance=rebalance,
            ready=ready,
            moved_first=[firsts[p] for p in moved],
            own_first=[firsts[p] for p in own],
            read=read,
            to_restore=to_restore,
            load=load_line().split(" on ")[0].removeprefix("load "),
        )


async def takeover(run: Run, n: int, seed: int) -> None:
    """`--takeover` (the module's docstring)."""
    args, pair = run.args, Pair(run)
    if not args.store.startswith("rocksdb"):
        raise SystemExit("--takeover: standbys keep their tables in RocksDB (--store rocksdb://)")
    results: list[Takeover] = []
    try:
        pair.start("a", 1, "standby")
        pair.start("b", 1, "standby")
        await pair.settled()
        load = Fleet(n, args.events_per_session, seed)
        rate = await run.load(load, deadline=4 * 3600, workers=list(pair.workers.values()))
        print(
            f"load (two workers, a standby each): {len(load):,} events at {rate:,.0f} "
            f"events/s; {load_line()}",
            flush=True,
        )
        await asyncio.sleep(3 * run.settings.commit_interval_ms / 1000)  # bench pause: commits
        waited, lag = await pair.standbys_caught_up(deadline=1800)
        print(
            f"standbys: lag {lag:,.0f} records {waited:.1f} s after the load's commits; "
            f"{load_line()}",
            flush=True,
        )
        results.append(await pair.kill_and_measure("a", "b", "from its standby"))
        print(results[-1].row(), flush=True)

        # without standby: `b` again on its data dir, `a` on an empty one; `b` is killed
        pair.stop_all()
        shutil.rmtree(pair.data_dir("a"), ignore_errors=True)
        pair.start("b", 0, "no-standby")
        pair.start("a", 0, "no-standby")
        started = time.monotonic()
        await pair.settled()
        print(
            f"no standby: the two share the partitions {time.monotonic() - started:.1f} s "
            f"after their start (`a` restored its share); {load_line()}",
            flush=True,
        )
        results.append(await pair.kill_and_measure("b", "a", "without standby"))
        print(results[-1].row(), flush=True)
    finally:
        pair.stop_all()
        print(
            f"\n{n:,} open sessions x {args.events_per_session} events, {args.partitions} "
            "partitions, rocksdb://, two workers, kill -9 of one (seconds from the kill):"
        )
        print(HEADER)
        for result in results:
            print(result.row())
        for result in results:
            print(f"  {result.label}: moved partitions {result.moved}")
