"""Benchmark of `loopwatch worker` on a real broker. Prints figures.

    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 .venv/bin/python ops/bench/worker_bench.py \
        [--events 50000] [--sessions 200] [--rate 1000] [--seconds 20] [--profile]

* sustained: `--events` synthetic events (ops/bench/synth.py) are produced first; then,
  each with a consumer group of its own, a bare faust agent (ops/bench/bare_agent.py:
  reads the records, nothing else) and one worker read them. Figures: events / (last -
  first) (verdict produce times for the workers), and over the middle 80% of the events
  (leaves out start-up); the worker as a share of the bare agent. Then one worker and
  two worker processes of one app each start on an empty topic of their own, and the
  same events are produced into it once they hold its partitions (`/ready`): their
  rates from then (or the 10th percentile) to the 90th percentile, and two workers as a
  multiple of one (`--workers 1` skips these runs). With the backlog there from the
  start, the first worker to join took every partition and processed alone for a while,
  and in some runs had done the partitions it then kept: 0.92-1.00x "scale-out" on one
  core. Over each window: the CPU per event and cores of the agent or workers, how many
  of the machine's cores were busy and how many the host took (steal, /proc/stat), and
  the cores of the local broker and of the bench: whether the cores, not the code, were
  the limit. `--repeat N` runs it all N times, alternately, and prints the medians.
* latency: a fresh worker, events produced at `--rate` per second for `--seconds`;
  latency = when a verdict reader got the verdict - the event record's timestamp (same
  host clock); p50/p99 over the paced events, after a 2 s warm-up at 100 events/s.
  The reader runs in a process of its own, as a runtime's would: in the producer's event
  loop, a paced producer sending a request per event delayed the reader's fetches (its
  p99 was 60-67 ms while the worker's own event-to-acknowledgement p99 was 19-23 ms).
  It is positioned at the end of every partition before the paced run starts, so its
  own start-up (metadata, first fetch) is not counted as latency. Also printed: the
  worker's own event-to-verdict-acknowledged histogram (`/metrics`), as bucket bounds.
* --profile: the sustained run under cProfile; prints the top functions.
* --py-spy OUT: the one-worker sustained run sampled by py-spy (200 Hz, collapsed
  stacks written to OUT; `pip install py-spy` into the venv first). cProfile's per-call
  overhead inflates the many small calls of the detector several times over.
Each run uses topics and an app id of its own. Targets (issue 4): >= 5,000 events/s
sustained; p99 <= 50 ms at 1,000 events/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import pstats
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth import generate  # noqa: E402

from loopwatch.streams.kafka.admin import create_topics, delete_topics  # noqa: E402
from loopwatch.streams.settings import Settings  # noqa: E402

PREFIXES: list[str] = []
"""The topic prefixes this run made: their topics are deleted at the end (a long-lived
broker with thousands of bench topics answers slower: docs/performance.md)."""


def new_prefix() -> str:
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    PREFIXES.append(prefix)
    return prefix


async def drop_app_topics(env: dict[str, str]) -> None:
    """Delete the topics of the worker app of `env` (its prefix) once its run is over:
    with each run's topics kept until the end, a run's third round met a broker with
    ~800 more partitions whose request handlers used 0.8-1.0 of a core for the load
    that took 0.2-0.4 in the first round."""
    await delete_topics(Settings.from_env(env), env["LOOPWATCH_APP_ID"])


async def delete_run_topics(bootstrap: str, partitions: int) -> None:
    for prefix in PREFIXES:
        await delete_topics(Settings.from_env(worker_env(bootstrap, prefix, partitions)), prefix)


def worker_env(bootstrap: str, prefix: str, partitions: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    env.update(
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        LOOPWATCH_APP_ID=prefix,
        LOOPWATCH_EVENTS_TOPIC=f"{prefix}-events",
        LOOPWATCH_VERDICTS_TOPIC=f"{prefix}-verdicts",
        LOOPWATCH_WARNINGS_TOPIC=f"{prefix}-warnings",
        LOOPWATCH_DLQ_TOPIC=f"{prefix}-dlq",
        LOOPWATCH_EPISODES_TOPIC=f"{prefix}-episodes",
        LOOPWATCH_CONFIG_TOPIC=f"{prefix}-config",
        LOOPWATCH_PARTITIONS=str(partitions),
        LOOPWATCH_WEB_PORT=str(16000 + uuid.uuid4().int % 1000),
        LOOPWATCH_DATA_DIR=str(Path(tempfile.gettempdir()) / f"{prefix}-data"),
    )
    return env


def start_worker(
    env: dict[str, str],
    log: Path,
    profile: Path | None,
    sampled: Path | None = None,
    tree: Path = REPO,
) -> subprocess.Popen[bytes]:
    """A worker process running the code of `tree` (a checkout of this repository: its
    source comes first on the path, before the venv's editable install of this one;
    trees from before the `loopwatch.` namespace run `streams.cli`). `sampled`: py-spy's
    raw samples go there."""
    command = [sys.executable]
    if sampled is not None:  # py-spy's raw (collapsed stacks) output; cProfile inflates calls
        spy = str(Path(sys.executable).with_name("py-spy"))
        command = [spy, "record", "-r", "200", "-f", "raw", "-o", str(sampled), "--", *command]
    if profile is not None:
        command += ["-m", "cProfile", "-o", str(profile)]
    module = "loopwatch.streams.cli" if (tree / "loopwatch").is_dir() else "streams.cli"
    command += ["-m", module, "worker", "--loglevel", "warning"]
    if tree != REPO:
        env = {**env, "PYTHONPATH": str(tree)}
    return subprocess.Popen(
        command, env=env, cwd=tree, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)


async def produce_all(bootstrap: str, topic: str, lines: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=10, acks="all")
    await producer.start()
    try:
        for key, value in lines:
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


async def produce_batched(
    bootstrap: str, topic: str, lines: list[tuple[bytes, bytes]], partitions: int
) -> None:
    """`lines` into `topic` as fast as this process can: prebuilt batches per partition
    (16 KiB, as `produce_all`'s; the keys' partitions as the default partitioner chooses
    them), so the records appear within a fraction of a second while workers wait."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    try:
        choose = DefaultPartitioner()
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        every = list(range(partitions))
        for key, value in lines:
            by_partition.setdefault(choose(key, every, every), []).append((key, value))
        sent = []
        for partition, rows in by_partition.items():
            batch = producer.create_batch()
            for key, value in rows:
                if batch.append(key=key, value=value, timestamp=None) is None:
                    sent.append(await producer.send_batch(batch, topic, partition=partition))
                    batch = producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)
            sent.append(await producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def produce_paced(
    bootstrap: str, topic: str, lines: list[tuple[bytes, bytes]], rate: float
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, acks="all")
    await producer.start()
    try:
        start = time.monotonic()
        for n, (key, value) in enumerate(lines):
            due = start + n / rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)  # pacing the load, not synchronisation
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


async def collect(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    *,
    deadline: float,
    ready: asyncio.Event | None = None,
    patient: bool = False,
) -> list[tuple[float, Any]]:
    """(receive time, record) of `count` verdicts of `topic`.

    Without `ready`: from the start of the topic. With it: from the current end of every
    partition, and `ready` is set once the consumer is positioned there, so the caller
    can start producing without the consumer's start-up counting as verdict latency.
    `patient`: for throughput runs, which time verdicts by their records' timestamps, not
    by their receipt: a fetch waits for 256 KiB or 500 ms, so that the reader costs the
    broker and the cores the workers share with it little (polling every 5 ms, it cost
    0.12 of a core in the bench and more in the broker).
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=500 if patient else 5,
        fetch_min_bytes=256 * 1024 if patient else 1,
    )
    await consumer.start()
    got: list[tuple[float, Any]] = []
    try:
        tps = [TopicPartition(topic, partition) for partition in range(partitions)]
        consumer.assign(tps)
        if ready is not None:
            await consumer.seek_to_end(*tps)
            for tp in tps:
                await consumer.position(tp)
            ready.set()
        end = time.monotonic() + deadline
        while len(got) < count and time.monotonic() < end:
            batches = await consumer.getmany(timeout_ms=200)
            now = time.time()
            for batch in batches.values():
                got.extend((now, record) for record in batch)
    finally:
        await consumer.stop()
    return got


def records(events: int, sessions: int, seed: int) -> list[tuple[bytes, bytes]]:
    out = []
    for event in generate(sessions, events, seed):
        out.append((event["session_id"].encode(), json.dumps(event).encode()))
    return out


def span_rates(stamps: list[float]) -> tuple[float, float]:
    """events/s from the first to the last stamp, and over the middle 80% (the 10th to
    the 90th percentile: leaves out start-up and a rebalance while a second worker joins).
    """
    stamps = sorted(stamps)
    whole = len(stamps) / max(1e-9, stamps[-1] - stamps[0])
    low, high = len(stamps) // 10, len(stamps) * 9 // 10
    middle = (high - low) / max(1e-9, stamps[high] - stamps[low])
    return whole, middle


async def run_bare_agent(
    bootstrap: str, topic: str, count: int, workdir: Path
) -> tuple[dict[str, float], Usage]:
    """The bare faust agent (ops/bench/bare_agent.py) over `topic`; its time marks and
    the CPU it and the machine used."""
    result = workdir / f"bare-{uuid.uuid4().hex[:6]}.json"
    app_id = f"bench-bare-{uuid.uuid4().hex[:8]}"
    script = Path(__file__).resolve().parent / "bare_agent.py"
    with (workdir / "bare.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(script), bootstrap, topic, app_id, str(count), str(result)],
            cwd=workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        usage = Usage([proc.pid], bootstrap)
        sampler = asyncio.ensure_future(usage.sample())
        try:
            deadline = time.monotonic() + 600
            while not result.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the bare agent stopped early; see {workdir}/bare.log")
                await asyncio.sleep(0.2)  # polling a child's result file, not a test
        finally:
            sampler.cancel()
            stop_worker(proc)
    marks: dict[str, float] = json.loads(result.read_text())
    return marks, usage


def worker_partitions(port: str) -> list[int] | None:
    """The events partitions a worker on `port` processes now (its `/ready`), or None
    while it is not ready (starting, rebalancing, recovering)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1) as response:
            document = json.loads(response.read())
    except (OSError, ValueError):  # not listening yet, or 503 (HTTPError is an OSError)
        return None
    return list(document["partitions"]) if document.get("ready") else None


async def settled_at(ports: list[str], partitions: int, deadline: float) -> float:
    """When every worker on `ports` was ready and their partitions split all `partitions`
    between them: from then on, each processes its share."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        held = await asyncio.gather(*(asyncio.to_thread(worker_partitions, port) for port in ports))
        if all(held) and sorted(p for own in held if own for p in own) == list(range(partitions)):
            return time.time()
        await asyncio.sleep(0.1)  # polling the workers' /ready, not a test
    raise RuntimeError(f"the workers on ports {ports} did not share the partitions in time")


async def run_workers(
    args: argparse.Namespace,
    env: dict[str, str],
    workers: int,
    workdir: Path,
    count: int,
    *,
    late: list[tuple[bytes, bytes]] | None = None,
) -> tuple[list[float], Usage, float]:
    """`workers` worker processes of one app over the backlog; their verdicts' times, the
    CPU they and the machine used, and when the backlog was all there. The app's topics
    are deleted once they stop (`drop_app_topics`).

    `late`: the workers' events topic starts empty, and `late` is produced into it once
    they hold all its partitions between them (`settled_at`). On a backlog that is there
    from the start, the first worker to join takes every partition and processes for a
    while alone, and partitions move while the second joins: that says nothing about
    scale-out."""
    profile = workdir / "worker.prof" if args.profile and workers == 1 else None
    sampled = Path(args.py_spy).resolve() if args.py_spy and workers == 1 else None
    procs = []
    for n in range(workers):
        own = dict(env)
        own["LOOPWATCH_WEB_PORT"] = str(int(env["LOOPWATCH_WEB_PORT"]) + n)
        own["LOOPWATCH_DATA_DIR"] = f"{env['LOOPWATCH_DATA_DIR']}-{n}"
        procs.append(start_worker(own, workdir / f"sustained-{workers}-{n}.log", profile, sampled))
    usage = Usage([proc.pid for proc in procs], args.bootstrap)
    sampler = asyncio.ensure_future(usage.sample())
    ports = [str(int(env["LOOPWATCH_WEB_PORT"]) + n) for n in range(workers)]
    there = time.time()
    try:
        if late is not None:
            await settled_at(ports, args.partitions, deadline=120)
            await produce_batched(
                args.bootstrap, env["LOOPWATCH_EVENTS_TOPIC"], late, args.partitions
            )
            there = time.time()
        got = await collect(
            args.bootstrap,
            env["LOOPWATCH_VERDICTS_TOPIC"],
            args.partitions,
            count,
            deadline=600,
            patient=True,
        )
    finally:
        sampler.cancel()
        for proc in procs:
            stop_worker(proc)
        await drop_app_topics(env)
    if profile is not None:
        print("profile (top 25 by cumulative time, worker process):")
        pstats.Stats(str(profile)).sort_stats("cumulative").print_stats(25)
        pstats.Stats(str(profile)).sort_stats("tottime").print_stats(25)
    return [record.timestamp / 1000 for _, record in got], usage, there  # produce times


async def compare_trees(args: argparse.Namespace, workdir: Path) -> None:
    """One worker from each of `--tree` in turn (A, B, A, B, ...: `--rounds`), each with
    an app (group, changelog, verdicts) of its own over the same backlog: the code of
    two commits under the same input and the same load."""
    prefix = new_prefix()
    settings = Settings.from_env(worker_env(args.bootstrap, prefix, args.partitions))
    await create_topics(settings)
    data = records(args.events, args.sessions, seed=7)
    await produce_all(args.bootstrap, f"{prefix}-events", data)
    trees = [Path(tree).resolve() for tree in args.tree]
    rates: dict[Path, list[float]] = {tree: [] for tree in trees}
    cpus: dict[Path, list[float]] = {tree: [] for tree in trees}
    print(f"trees: {len(data)} events backlog, {args.partitions} partitions")
    try:
        for round_ in range(args.rounds):
            for tree in trees:
                app = f"{prefix}-{uuid.uuid4().hex[:6]}"
                env = worker_env(args.bootstrap, app, args.partitions)
                env["LOOPWATCH_EVENTS_TOPIC"] = f"{prefix}-events"
                await create_topics(Settings.from_env(env))
                load = os.getloadavg()[0]
                proc = start_worker(env, workdir / f"tree-{round_}.log", None, tree=tree)
                usage = Usage([proc.pid], args.bootstrap)
                sampler = asyncio.ensure_future(usage.sample())
                try:
                    got = await collect(
                        args.bootstrap, env["LOOPWATCH_VERDICTS_TOPIC"], args.partitions,
                        len(data), deadline=600, patient=True,
                    )  # fmt: skip
                finally:
                    sampler.cancel()
                    stop_worker(proc)
                await drop_app_topics(env)
                stamps = sorted(record.timestamp / 1000 for _, record in got)
                whole, middle = span_rates(stamps)
                per_event = usage.cpu_per_event(*middle_window(stamps), len(stamps) * 0.8)
                rates[tree].append(whole)
                cpus[tree].append(per_event)
                print(
                    f"  round {round_ + 1} {tree.name}: {whole:8,.0f} events/s "
                    f"(middle 80%: {middle:,.0f}; worker CPU {per_event:,.0f} us/event)  "
                    f"load {load:.2f}",
                    flush=True,
                )
    finally:
        await delete_topics(settings, prefix)
    for tree, figures in rates.items():
        print(
            f"  {tree.name}: median {statistics.median(figures):,.0f} events/s "
            f"({', '.join(f'{x:,.0f}' for x in figures)}), "
            f"CPU {statistics.median(cpus[tree]):,.0f} us/event "
            f"({', '.join(f'{x:,.0f}' for x in cpus[tree])})"
        )


class Usage:
    """CPU time of some processes and busy time of the whole machine, sampled every 50 ms
    (Linux /proc), so a run's figures can say whether the cores were the limit: a second
    worker cannot scale out onto a core that the first, the broker and the bench already
    keep busy. On a virtual machine the host may also run others on our vCPUs ("steal"):
    that time is neither busy nor idle here, and is shown on its own, because it explains
    runs of the same code on the same load that differ by half."""

    def __init__(self, pids: list[int], bootstrap: str | None = None) -> None:
        self.pids = pids
        self.bootstrap = bootstrap
        # With `bootstrap`, beside the measured processes: the local broker (when
        # `ops/kafka/kafka.sh` runs it) and this bench, whose verdict reader also costs the
        # broker and the cores (`between` shows them).
        self.others = (
            {"broker": local_broker_pid(bootstrap), "bench": os.getpid()} if bootstrap else {}
        )
        self.samples: list[tuple[float, float, float, float, tuple[float, ...]]] = []
        """(wall time, CPU seconds of the processes, busy CPU seconds of the machine,
        CPU seconds the host took from its vCPUs, CPU seconds of each of `others`)"""

    async def sample(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while True:
            processes = sum(cpu_ticks(pid) for pid in self.pids)
            others = tuple(cpu_ticks(pid) / tick for pid in self.others.values())
            busy, steal = machine_ticks()
            sample = (time.time(), processes / tick, busy / tick, steal / tick, others)
            self.samples.append(sample)
            await asyncio.sleep(0.05)  # sampling CPU counters, not a test

    def _span(self, start: float, end: float) -> tuple[Any, Any]:
        """The first and last samples within `start`..`end` (wall times)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            raise ValueError("too few CPU samples in the window")
        return inside[0], inside[-1]

    def cpu_per_event(self, start: float, end: float, events: float) -> float:
        """The processes' CPU µs per event from `start` to `end`, over which `events`
        were processed (counted over the samples' part of the window)."""
        first, last = self._span(start, end)
        share = events * (last[0] - first[0]) / max(1e-9, end - start)
        return (last[1] - first[1]) / max(1.0, share) * 1e6

    def cores(self, start: float, end: float) -> tuple[float, float, float]:
        """(the processes' cores, the machine's busy cores, the cores the host took) from
        `start` to `end`."""
        first, last = self._span(start, end)
        wall = last[0] - first[0]
        return (
            (last[1] - first[1]) / wall,
            (last[2] - first[2]) / wall,
            (last[3] - first[3]) / wall,
        )

    def others_cores(self, start: float, end: float) -> dict[str, float]:
        """The cores of each of `others` found running, from `start` to `end`."""
        first, last = self._span(start, end)
        wall = last[0] - first[0]
        pids = self.others.values()
        return {
            name: (after - before) / wall
            for name, pid, before, after in zip(self.others, pids, first[4], last[4], strict=True)
            if pid
        }

    def between(self, start: float, end: float, events: float) -> str:
        """The processes' CPU per event and cores, the machine's busy cores and the
        host's steal (and with `bootstrap`, the local broker's cores and GC pauses)."""
        try:
            cores, busy, steal = self.cores(start, end)
        except ValueError as exc:
            return str(exc)
        others = ", ".join(f"{name} {x:.2f}" for name, x in self.others_cores(start, end).items())
        pauses = broker_pauses(self.bootstrap, start, end) if self.bootstrap else ""
        return (
            f"CPU {self.cpu_per_event(start, end, events):,.0f} us/event, "
            f"{cores:.2f} cores; {machine_load(busy, steal)}"
            + (f" ({others})" if others else "")
            + (f"; {pauses}" if pauses else "")
        )


def machine_load(busy: float, steal: float) -> str:
    """The machine's busy cores, and those the host took (steal), for a figure's line."""
    return f"machine busy {busy:.2f} of {os.cpu_count()} cores, host steal {steal:.2f}"


def machine_ticks() -> tuple[int, int]:
    """The machine's busy CPU ticks since boot, and those the host took (steal)."""
    # /proc/stat "cpu" line: user nice system idle iowait irq softirq steal (then guest
    # and guest_nice, already counted in user and nice)
    cpu = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6], cpu[7]


def cpu_ticks(pid: int) -> int:
    """User and system CPU ticks of process `pid` (0 when it is gone, or for pid 0)."""
    if not pid:
        return 0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def local_broker_dir(bootstrap: str) -> Path:
    """The data directory `ops/kafka/kafka.sh` gives a broker on the port of `bootstrap`."""
    port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)[-1]
    cache = Path(os.environ.get("LOOPWATCH_KAFKA_CACHE", REPO / ".cache" / "kafka"))
    return cache / f"broker-{port}"


# a pause's line in the GC log kafka.sh has the broker write (decorations: time, tags)
GC_PAUSE = re.compile(r"^\[([^\]]+)\]\[gc\s*\] GC\(\d+\) Pause .* ([\d.]+)ms$")


def broker_pauses(bootstrap: str, start: float, end: float) -> str:
    """The local broker's GC pauses that ended from `start` to `end` (wall times), from
    its GC log: each stops every request, so a latency tail is read against them. Empty
    when there is no such log (another broker)."""
    try:
        lines = (local_broker_dir(bootstrap) / "logs" / "kafkaServer-gc.log").read_text()
    except OSError:
        return ""
    pauses = []
    for line in lines.splitlines():
        match = GC_PAUSE.match(line)
        if match is None:
            continue
        at = datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
        if start <= at <= end:
            pauses.append(float(match[2]))
    if not pauses:
        return "broker GC: no pause"
    count = f"{len(pauses)} pause{'s' if len(pauses) > 1 else ''}"
    return f"broker GC: {count}, {sum(pauses):.0f} ms, max {max(pauses):.1f} ms"


def local_broker_pid(bootstrap: str) -> int:
    """The pid of the broker `ops/kafka/kafka.sh` runs on this host for the port of
    `bootstrap`, or 0 (another broker: its CPU is not shown)."""
    try:
        pid = int((local_broker_dir(bootstrap) / "kafka.pid").read_text())
        alive = b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return 0
    return pid if alive else 0


def middle_window(stamps: list[float]) -> tuple[float, float]:
    """The 10th and 90th percentile of `stamps` (the middle 80% of the events)."""
    ordered = sorted(stamps)
    return ordered[len(ordered) // 10], ordered[len(ordered) * 9 // 10]


async def sustained(args: argparse.Namespace, workdir: Path) -> None:
    """The backlog, read by a bare faust agent, one worker, then two workers (each with
    a group of its own), in this order, in one run; `--repeat N` runs that sequence N
    times over the same backlog and prints the median ratios: the machine's speed drifts
    from one minute to the next, so one bare run against one worker run says little."""
    prefix = new_prefix()
    env = worker_env(args.bootstrap, prefix, args.partitions)
    await create_topics(Settings.from_env(env))
    data = records(args.events, args.sessions, seed=7)
    await produce_all(args.bootstrap, f"{prefix}-events", data)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"sustained: {len(data)} events backlog, {args.partitions} partitions, load {load}")
    shares: list[float] = []
    scale_outs: list[float] = []
    for round_ in range(args.repeat):
        if args.repeat > 1:
            print(f" round {round_ + 1} of {args.repeat}")
        share, scale_out = await sustained_round(args, workdir, f"{prefix}-events", data)
        shares.append(share)
        if scale_out is not None:
            scale_outs.append(scale_out)
    if args.repeat > 1:
        listed = ", ".join(f"{share:.0%}" for share in shares)
        print(
            f"  over {args.repeat} rounds: one worker {statistics.median(shares):.0%} of the "
            f"bare agent (median; {listed})"
        )
        if scale_outs:
            listed = ", ".join(f"{x:.2f}x" for x in scale_outs)
            print(f"  two workers {statistics.median(scale_outs):.2f}x one (median; {listed})")
    print(f"  load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


async def sustained_round(
    args: argparse.Namespace,
    workdir: Path,
    events_topic: str,
    data: list[tuple[bytes, bytes]],
) -> tuple[float, float | None]:
    """One bare agent and one worker over `events_topic` (holding `data`), then (unless
    `--workers 1`) one and two workers over `data` produced into a topic of their own once
    they hold its partitions; each with a group, changelog and verdicts of its own.
    Returns the worker's share of the bare agent (whole runs) and two workers' multiple
    of one (both over the late events)."""
    count = len(data)
    marks, bare_usage = await run_bare_agent(args.bootstrap, events_topic, count, workdir)
    bare_whole = count / max(1e-9, marks["last"] - marks["first"])
    bare_middle = (count * 0.8) / max(1e-9, marks["p90"] - marks["p10"])
    print(f"  bare faust agent:  {bare_whole:8,.0f} events/s  (middle 80%: {bare_middle:,.0f})")
    print(f"    middle 80%: {bare_usage.between(marks['p10'], marks['p90'], count * 0.8)}")

    one, one_usage, _ = await run_workers(
        args, await app_env(args, events_topic), 1, workdir, count
    )
    one_whole, one_middle = span_rates(one)
    print(
        f"  one worker:        {one_whole:8,.0f} events/s  (middle 80%: {one_middle:,.0f})  "
        f"{one_whole / bare_whole:.0%} of the bare agent ({one_middle / bare_middle:.0%})"
    )
    print(f"    middle 80%: {one_usage.between(*middle_window(one), len(one) * 0.8)}")
    if args.workers < 2:
        return one_whole / bare_whole, None
    # One, then two workers, each of an app of its own over the same events produced into
    # a topic of its own once the workers have its partitions: both measured the same
    # way, from then (or the 10th percentile, if later) to the 90th percentile.
    rates = []
    for workers in (1, 2):
        env = await app_env(args, None)
        stamps, usage, there = await run_workers(args, env, workers, workdir, count, late=data)
        low, high = middle_window(stamps)
        start = max(there, low)
        inside = sum(1 for stamp in stamps if start <= stamp <= high)
        if high - start <= 0 or inside < count // 10:
            print(f"  {workers} worker(s): too few verdicts after the events were produced")
            return one_whole / bare_whole, None
        rates.append(inside / (high - start))
        label = "one worker, late:" if workers == 1 else "two workers, late:"
        times = "" if workers == 1 else f"  {rates[1] / rates[0]:.2f}x one worker, late"
        print(f"  {label:<19}{rates[-1]:8,.0f} events/s  ({inside:,} events){times}")
        print(f"    same span: {usage.between(start, high, inside)}")
    return one_whole / bare_whole, rates[1] / rates[0]


async def app_env(args: argparse.Namespace, events_topic: str | None) -> dict[str, str]:
    """The environment of a worker app of its own (group, changelog, verdicts and the
    other topics, created here) that reads `events_topic` (None: a new one of its own)."""
    env = worker_env(args.bootstrap, new_prefix(), args.partitions)
    if events_topic is not None:
        env["LOOPWATCH_EVENTS_TOPIC"] = events_topic
    await create_topics(Settings.from_env(env))
    return env


def _reader_process(
    bootstrap: str, topic: str, partitions: int, count: int, *, ready: Any, out: Any
) -> None:
    """Child process: read `count` verdicts from the end of `topic`; send back
    (receive time, session_id, seq) of each."""

    async def run() -> list[tuple[float, str, int]]:
        flag = asyncio.Event()
        task = asyncio.create_task(
            collect(bootstrap, topic, partitions, count, deadline=300, ready=flag)
        )
        await flag.wait()
        ready.set()
        got = await task
        out_rows = []
        for received, record in got:
            verdict = json.loads(record.value)
            out_rows.append((received, verdict["session_id"], verdict["seq"]))
        return out_rows

    out.send(asyncio.run(run()))
    out.close()


async def latency(args: argparse.Namespace, workdir: Path) -> None:
    prefix = new_prefix()
    env = worker_env(args.bootstrap, prefix, args.partitions)
    await create_topics(Settings.from_env(env))
    count = int(args.rate * args.seconds)
    data = records(count, args.sessions, seed=8)
    proc = start_worker(env, workdir / "latency.log", None)
    spawn = multiprocessing.get_context("spawn")
    try:
        # Warm-up traffic into the same topic first, so the group is joined and recovered.
        # Then 2 s at the measured rate, so the figures are the steady state's (without
        # it, the first second at 1,000 events/s had a p99 of ~115 ms, the rest 12-38 ms).
        warm = records(int(2 * args.rate), 50, seed=9)
        await produce_paced(args.bootstrap, f"{prefix}-events", warm[:200], rate=100)
        await produce_paced(args.bootstrap, f"{prefix}-events", warm[200:], rate=args.rate)
        await collect(
            args.bootstrap, f"{prefix}-verdicts", args.partitions, len(warm), deadline=120
        )
        worker_before = await asyncio.to_thread(worker_histogram, env)
        ready = spawn.Event()
        receive, send = spawn.Pipe(duplex=False)
        reader = spawn.Process(
            target=_reader_process,
            args=(args.bootstrap, f"{prefix}-verdicts", args.partitions, count),
            kwargs={"ready": ready, "out": send},
        )
        reader.start()
        if not await asyncio.to_thread(ready.wait, 60):
            raise RuntimeError("the verdict reader did not get ready within 60 s")
        await produce_paced(args.bootstrap, f"{prefix}-events", data, rate=args.rate)
        if not await asyncio.to_thread(receive.poll, 300):
            raise RuntimeError("the verdict reader sent nothing within 300 s")
        got = receive.recv()
        reader.join(timeout=30)
        worker_after = await asyncio.to_thread(worker_histogram, env)
    finally:
        stop_worker(proc)
    # Latency of each verdict: receive time - the produce time of its event, found by
    # (session_id, seq) in the events we sent (event record timestamps ≈ send time).
    sent_at = await event_times(args.bootstrap, f"{prefix}-events")
    lat = []
    by_second: dict[int, list[float]] = {}
    start = min(sent_at.values())
    for received, session_id, seq in got:
        key = (session_id, seq)
        if key in sent_at:
            lat.append((received - sent_at[key]) * 1000)
            by_second.setdefault(int(sent_at[key] - start), []).append(lat[-1])
    lat.sort()
    q = statistics.quantiles(lat, n=100)
    print(
        f"latency at {args.rate:,.0f} events/s for {args.seconds} s ({len(lat)} events): "
        f"p50 {q[49]:.1f} ms, p90 {q[89]:.1f} ms, p99 {q[98]:.1f} ms, max {lat[-1]:.1f} ms"
    )
    print(
        "p99 by second of the run (ms): "
        + " ".join(
            f"{max(v) if len(v) < 100 else sorted(v)[int(len(v) * 0.99)]:.0f}"
            for _, v in sorted(by_second.items())
        )
    )
    in_worker = {b: worker_after[b] - worker_before.get(b, 0.0) for b in worker_after}
    print(f"worker's own event-to-verdict-acknowledged: {bucket_quantiles(in_worker)}")


def worker_histogram(env: dict[str, str]) -> dict[float, float]:
    """Cumulative bucket counts of the worker's latency histogram (`le` -> count)."""
    url = f"http://127.0.0.1:{env['LOOPWATCH_WEB_PORT']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("loopwatch_event_to_verdict_seconds_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def bucket_quantiles(buckets: dict[float, float]) -> str:
    """p50/p99 as "<= bucket bound" from cumulative bucket counts."""
    total = buckets.get(float("inf"), 0.0)
    if not total:
        return "no observations"
    parts = []
    for name, fraction in (("p50", 0.5), ("p99", 0.99)):
        bound = next(b for b in sorted(buckets) if buckets[b] >= fraction * total)
        parts.append(f"{name} <= {bound * 1000:g} ms")
    return ", ".join(parts) + f" ({total:.0f} verdicts)"


async def event_times(bootstrap: str, topic: str) -> dict[tuple[str, int], float]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    out: dict[tuple[str, int], float] = {}
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=1000)
            if not batches:
                break
            for batch in batches.values():
                for record in batch:
                    event = json.loads(record.value)
                    out[event["session_id"], event["seq"]] = record.timestamp / 1000
    finally:
        await consumer.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    )
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--py-spy",
        metavar="OUT",
        help="sample the one-worker run with py-spy (installed in the venv) into OUT "
        "(collapsed stacks)",
    )
    parser.add_argument("--workers", type=int, default=2, help="1: skip the two-worker run")
    parser.add_argument("--only", choices=("sustained", "latency"))
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        help="compare the worker of these checkouts (give two or more), alternately",
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --tree: runs per tree")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="sustained: run the bare agent, one and two workers this many times, alternately",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loopwatch-bench-") as tmp:
        try:
            if args.tree:
                asyncio.run(compare_trees(args, Path(tmp)))
                return 0
            if args.only in (None, "sustained"):
                asyncio.run(sustained(args, Path(tmp)))
            if args.only in (None, "latency"):
                asyncio.run(latency(args, Path(tmp)))
        finally:
            asyncio.run(delete_run_topics(args.bootstrap, args.partitions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
