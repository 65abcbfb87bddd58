"""What the benches that run `loopwatch worker` on a real broker share: topics of a run
of their own, worker processes, producers and a verdict reader, CPU usage sampling
(`Usage`, `machine_ticks`) and the local broker's GC pauses.

Imported as `harness` by the benches of this folder (each puts the folder on the path).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
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
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(REPO), str(HERE)]

from synth import generate  # noqa: E402

from loopwatch.streams.demo.naming import isolated_env  # noqa: E402
from loopwatch.streams.demo.worker_process import WorkerProcess  # noqa: E402
from loopwatch.streams.kafka.admin import delete_topics  # noqa: E402
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
    """A worker's environment for a run of its own (`isolated_env`): topics and app id
    named after `prefix`, a web port of its own, data under the temporary directory."""
    port = 16000 + uuid.uuid4().int % 1000
    data_dir = Path(tempfile.gettempdir()) / f"{prefix}-data"
    return isolated_env(bootstrap, prefix, partitions, port, data_dir)


def start_worker(
    env: dict[str, str],
    log: Path,
    profile: Path | None,
    sampled: Path | None = None,
    *,
    tree: Path = REPO,
    module: str | None = None,
) -> WorkerProcess:
    """A worker process running the code of `tree` (a checkout of this repository: its
    source comes first on the path, before the venv's editable install of this one;
    trees from before the `loopwatch.` namespace run `streams.cli`). `profile`: under
    cProfile, its stats written there; `sampled`: py-spy's raw samples go there.
    `module`: run that module of ops/bench instead of the CLI (`detector_floor`)."""
    interpreter = [sys.executable]
    if sampled is not None:  # py-spy's raw (collapsed stacks) output; cProfile inflates calls
        spy = str(Path(sys.executable).with_name("py-spy"))
        interpreter = [
            spy,
            "record",
            "-r",
            "200",
            "-f",
            "raw",
            "-o",
            str(sampled),
            "--",
            *interpreter,
        ]
    if profile is not None:
        interpreter += ["-m", "cProfile", "-o", str(profile)]
    if module is not None:
        env = _path_first(env, HERE)
    else:
        module = "loopwatch.streams.cli" if (tree / "loopwatch").is_dir() else "streams.cli"
    if tree != REPO:  # the tree first; a PYTHONPATH given for the worker after it
        env = _path_first(env, tree)
    worker = WorkerProcess(
        Settings.from_env(env), log, env=env, cwd=tree, interpreter=interpreter, module=module
    )
    worker.start()
    return worker


def _path_first(env: dict[str, str], path: Path) -> dict[str, str]:
    """`env` with `path` first on its PYTHONPATH."""
    rest = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return {**env, "PYTHONPATH": os.pathsep.join([str(path), *rest])}


def stop_worker(worker: WorkerProcess) -> None:
    """SIGINT (cProfile writes its stats then), and its exit."""
    worker.stop(signal.SIGINT, timeout=120)


BURST_BATCH_BYTES = 512 * 1024
"""`produce_batched`'s batches: half the broker's default largest message (1 MiB)."""


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
    """`lines` into `topic` as fast as this process can: prebuilt batches of up to
    `BURST_BATCH_BYTES` per partition (the keys' partitions as the default partitioner
    chooses them), every partition's in parallel, so the records appear within a fraction
    of a second while workers wait. (With 16 KiB batches sent one partition after the
    other, half of the scale bench's hot bursts kept the worker at half a core:
    docs/performance.md §4, "Session records through orjson".)"""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=0, max_batch_size=BURST_BATCH_BYTES
    )
    await producer.start()
    try:
        choose = DefaultPartitioner()
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        every = list(range(partitions))
        for key, value in lines:
            by_partition.setdefault(choose(key, every, every), []).append((key, value))

        async def send(partition: int, rows: list[tuple[bytes, bytes]]) -> None:
            sent = []
            batch = producer.create_batch()
            for key, value in rows:
                if batch.append(key=key, value=value, timestamp=None) is None:
                    sent.append(await producer.send_batch(batch, topic, partition=partition))
                    batch = producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)
            sent.append(await producer.send_batch(batch, topic, partition=partition))
            await asyncio.gather(*sent)

        await asyncio.gather(*(send(p, rows) for p, rows in by_partition.items()))
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
    key: bytes | None = None,
) -> list[tuple[float, Any]]:
    """(receive time, record) of `count` verdicts of `topic` (`key`: of that key only).

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
                got.extend((now, record) for record in batch if key in (None, record.key))
    finally:
        await consumer.stop()
    return got


async def count_verdicts(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    *,
    deadline: float,
    ready: asyncio.Event,
) -> tuple[int, float, float]:
    """`collect(..., ready=ready, patient=True)` that keeps no record: how many of `count`
    verdicts came, and the first and last of their record timestamps (epoch seconds)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=500,
        fetch_min_bytes=256 * 1024,
    )
    await consumer.start()
    got, first, last = 0, float("inf"), float("-inf")
    try:
        tps = [TopicPartition(topic, partition) for partition in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:
            await consumer.position(tp)
        ready.set()
        end = time.monotonic() + deadline
        while got < count and time.monotonic() < end:
            batches = await consumer.getmany(timeout_ms=200)
            for batch in batches.values():
                if batch:
                    got += len(batch)
                    first = min(first, batch[0].timestamp / 1000)
                    last = max(last, batch[-1].timestamp / 1000)
    finally:
        await consumer.stop()
    return got, first, last


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


def worker_partitions(worker: WorkerProcess) -> list[int] | None:
    """The events partitions `worker` processes now (its `/ready`), or None while it is
    not ready (starting, rebalancing, recovering)."""
    status, document = worker.get("/ready")
    return list(document["partitions"]) if status == 200 and document.get("ready") else None


async def settled_at(workers: list[WorkerProcess], partitions: int, deadline: float) -> float:
    """When every one of `workers` was ready and their partitions split all `partitions`
    between them: from then on, each processes its share."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        held = await asyncio.gather(*(asyncio.to_thread(worker_partitions, w) for w in workers))
        if all(held) and sorted(p for own in held if own for p in own) == list(range(partitions)):
            return time.time()
        await asyncio.sleep(0.1)  # polling the workers' /ready, not a test
    raise RuntimeError("the workers did not share the partitions in time")


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


async def run_bare_agent(
    bootstrap: str, topic: str, count: int, workdir: Path, script_name: str = "bare_agent.py"
) -> tuple[dict[str, float], Usage]:
    """The bare faust agent (ops/bench/bare_agent.py), or another reader of the same
    interface (`script_name`: decode_only.py, a plain aiokafka consumer that decodes),
    over `topic`; its time marks and the CPU it and the machine used."""
    stem = Path(script_name).stem
    result = workdir / f"{stem}-{uuid.uuid4().hex[:6]}.json"
    app_id = f"bench-{stem}-{uuid.uuid4().hex[:8]}"
    script = HERE / script_name
    with (workdir / f"{stem}.log").open("wb") as log:
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
                    raise RuntimeError(f"{stem} stopped early; see {workdir}/{stem}.log")
                await asyncio.sleep(0.2)  # polling a child's result file, not a test
        finally:
            sampler.cancel()
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
    marks: dict[str, float] = json.loads(result.read_text())
    return marks, usage
