"""Scale benchmark: what N open sessions cost one worker, and how fast it comes back.

    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 .venv/bin/python ops/bench/scale_bench.py \
        [--sessions 10000] [--events-per-session 20] [--store rocksdb://|memory://] \
        [--partitions 4] [--burst 20000] [--skip-recovery] [--tree CHECKOUT] \
        [--rocksdb-cache-mb MB] [--worker-env VAR=VALUE ...]
    ... scale_bench.py --expire --sessions 100000 --events-per-session 2 [--ttl SECONDS]
    ... scale_bench.py --takeover --sessions 100000 [--events-per-session 20]

On a real broker, with topics and an app id of its own, one worker (static membership,
so that a restart takes its partitions back at once) is loaded with `--sessions` open
sessions of `--events-per-session` events each (synthetic coding-agent sessions, their
`session_end` left out so that every session stays open). Printed, each with the load:

* load: events/s from the first to the last verdict of the load;
* state: the worker's RSS per open session, its RocksDB bytes (`rocksdb://`), the
  changelog's records and bytes on the broker's disk per session and per event;
* hot vs cold: `--burst` events over 100 sessions (hot: their state is in the caches)
  against the same count spread one per session over the open sessions (cold); both are
  user messages continuing the sessions (no tool calls: little detection work);
  `--bare-agent`: the bare faust agent over the hot burst's records, in the same run;
* recovery after `kill -9`: seconds until the restarted worker is ready and until the
  verdict of an event produced once it is ready (and when the worker stamped that verdict,
  by its record's timestamp: the bench's own reader and producer start-up apart), for a
  restart on the same data dir
  (`rocksdb://`: only the changelog's tail is read) and on an empty one (the whole
  changelog), with the records it restored by offset (its `/ready`) and those it read
  (`loopwatch_recovery_records_read_total`: the restore's rate), with each
  `--restore-store` (memory:// and rocksdb:// from one load) and `--restore-also` checkout
  in turn, `--restore-rounds` times; `--py-spy DIR`: each restart (with and without
  local state) sampled by py-spy (attached to the worker once started, 200 Hz,
  non-blocking unless `--py-spy-native`, until it is ready; collapsed stacks in
  DIR/<restart>.txt; `pip install py-spy` into the venv first), and the hot and cold
  bursts (DIR/hot.txt, DIR/cold.txt; with `--variant`, DIR/LABEL-ROUND-hot.txt and
  -cold.txt);
* the worker's log: its ERROR and WARNING lines counted over the whole run (faust's stall
  check once logged an ERROR per partition during a long backlog), the first of each.

`--takeover` measures a take-over instead, by a second worker holding a standby of the
killed one's partitions and by one without (`scale_takeover.py` says how; `rocksdb://`).

`--expire` measures a mass expiry instead: the worker's idle TTL is `--ttl` (by default
a little more than the load should take), and once the TTL has passed after the load, a
record per partition (triggers) makes every loaded session due at once, with one more
session's event (the probe) right behind them. Printed: the probe's and the triggers'
verdict delays (produced to received), how long until the worker had swept them all (its
`loopwatch_active_sessions`), and its RSS loaded, after the sweep, and after as many new
sessions were loaded again (the memory given back or reused).

Figures swing with what else runs on the machine: compare runs of one invocation, or
against `--sessions 100` in the same run, and read the load line printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Iterable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from aiokafka.partitioner import DefaultPartitioner  # noqa: E402
from harness import (  # noqa: E402
    Usage,
    collect,
    count_verdicts,
    delete_run_topics,
    local_broker_dir,
    new_prefix,
    produce_batched,
    run_bare_agent,
    start_worker,
    worker_env,
)
from synth import generate  # noqa: E402

from loopwatch.streams.kafka.admin import create_topics  # noqa: E402
from loopwatch.streams.settings import Settings  # noqa: E402

HOT_SESSIONS = 100


BLOCK_SESSIONS = 100_000
"""Sessions made and produced at a time by `Fleet`: making a synthetic session holds ~20
KB of its file texts, so a million at once would take ~20 GB. Up to this many sessions
are one block, interleaved as one (the runs before blocks existed)."""


def open_sessions(
    sessions: int, per_session: int, seed: int, first: int = 0
) -> list[tuple[bytes, bytes]]:
    """`sessions` interleaved synthetic sessions, none ended (`first`: the index of the
    first one, `synth.generate`)."""
    lines = []
    for event in generate(sessions, sessions * per_session, seed, first=first):
        if event["type"] != "session_end":
            lines.append((event["session_id"].encode(), json.dumps(event).encode()))
    return lines


class Fleet:
    """`open_sessions(sessions, ...)` a block of `BLOCK_SESSIONS` at a time (`blocks()`),
    made only when the previous block has been produced."""

    def __init__(self, sessions: int, per_session: int, seed: int) -> None:
        self.sessions, self.per_session, self.seed = sessions, per_session, seed

    def __len__(self) -> int:
        """Events in all: each session's `per_session` less its `session_end`."""
        return self.sessions * max(0, self.per_session - 1)

    def blocks(self) -> Iterator[list[tuple[bytes, bytes]]]:
        for first in range(0, self.sessions, BLOCK_SESSIONS):
            count = min(BLOCK_SESSIONS, self.sessions - first)
            yield open_sessions(count, self.per_session, self.seed, first=first)


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


LEVELS = ("CRITICAL", "ERROR", "WARNING")


def log_levels(logs: list[Path]) -> dict[str, list[str]]:
    """{level: the lines of that level} over the worker logs (faust's text format
    `[time] [pid] [LEVEL] ...` or LOOPWATCH_LOG_FORMAT=json)."""
    found: dict[str, list[str]] = {level: [] for level in LEVELS}
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            for level in LEVELS:
                if f"[{level}]" in line or f'"level": "{level}"' in line:
                    found[level].append(line)
                    break
    return found


def log_summary(workdir: Path, kinds: int = 5) -> str:
    """The counts of each level, and per level its `kinds` most frequent kinds of line
    (a line without its time and pid, its numbers as N) with their counts and an example."""
    found = log_levels(sorted(workdir.glob("*.log")))
    parts = [f"{len(lines):,} {level}" for level, lines in found.items()]
    details = []
    for level, lines in found.items():
        by_kind: dict[str, list[str]] = {}
        for line in lines:
            by_kind.setdefault(line_kind(line), []).append(line)
        ranked = sorted(by_kind.values(), key=len, reverse=True)
        for same in ranked[:kinds]:
            details.append(f"\n  {len(same):,} {level} like: {same[0][:300]}")
        if len(ranked) > kinds:
            details.append(f"\n  ... and {len(ranked) - kinds} more kinds of {level} line")
    return "worker logs: " + ", ".join(parts) + " lines" + "".join(details)


def line_kind(line: str) -> str:
    """A log line without faust's `[time] [pid]` prefix, its numbers as N, cut to 100."""
    text = line.split("] ", 2)[-1] if line.startswith("[") else line
    return re.sub(r"\d+", "N", text)[:100]


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
        if args.expire:
            self.env["LOOPWATCH_SESSION_TTL_SECONDS"] = str(self.ttl)
        if args.rocksdb_cache_mb is not None:
            self.env["LOOPWATCH_ROCKSDB_CACHE_MB"] = str(args.rocksdb_cache_mb)
        for setting in args.worker_env:
            name, _, value = setting.partition("=")
            self.env[name] = value
        self.settings = Settings.from_env(self.env)
        self.produced = 0
        self.worker: Any = None
        self.usage = ""
        """The last `process`'s worker CPU per event and the machine's cores."""

    @property
    def ttl(self) -> int:
        """The idle TTL of `--expire`: longer than the load (~2,500 events/s at worst)."""
        if self.args.ttl is not None:
            return int(self.args.ttl)
        return int(self.args.sessions * self.args.events_per_session / 2500) + 30

    def metric(self, name: str, worker: Any = None) -> float:
        """An unlabelled gauge of the worker's (or `worker`'s) /metrics page."""
        url = (worker or self.worker).url
        with urllib.request.urlopen(url + "/metrics", timeout=5) as page:
            for line in page.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise RuntimeError(f"no {name} on /metrics")

    def start(
        self, name: str, tree: str | None = None, extra: dict[str, str] | None = None
    ) -> None:
        tree = tree or self.args.tree
        where = Path(tree).resolve() if tree else REPO
        env = {**self.env, **(extra or {})}
        self.worker = start_worker(env, self.workdir / f"{name}.log", None, tree=where)

    async def process(self, lines: list[tuple[bytes, bytes]], deadline: float) -> float:
        """Produce `lines`; events/s from the first to the last of their verdicts. The
        worker's CPU per event and the machine's cores over that span: `self.usage`."""
        return await self._produce_counted([lines], len(lines), deadline, [self.worker])

    async def load(self, fleet: Fleet, deadline: float, workers: list[Any] | None = None) -> float:
        """`process` for a fleet's sessions, produced a block at a time (a million
        sessions' events would not fit in RAM at once); the CPU of `workers` (default:
        the run's worker) in `self.usage`."""
        return await self._produce_counted(
            fleet.blocks(), len(fleet), deadline, workers or [self.worker]
        )

    async def _produce_counted(
        self,
        blocks: Iterable[list[tuple[bytes, bytes]]],
        count: int,
        deadline: float,
        workers: list[Any],
    ) -> float:
        """Produce each of `blocks` in turn (`count` events in all) and count their
        verdicts; events/s from the first to the last verdict's record timestamp."""
        usage = Usage([worker.pid for worker in workers], self.bootstrap)
        sampler = asyncio.create_task(usage.sample())
        try:
            ready = asyncio.Event()
            reader = asyncio.create_task(
                count_verdicts(
                    self.bootstrap,
                    self.settings.verdicts_topic,
                    self.settings.verdict_partitions,
                    count,
                    deadline=deadline,
                    ready=ready,
                )
            )
            await ready.wait()
            made = 0
            # each block is made in a thread while the one before is produced: making
            # 100,000 sessions takes seconds, and the verdict reader must keep fetching
            pending = iter(blocks)
            upcoming = asyncio.ensure_future(asyncio.to_thread(next, pending, None))
            while (block := await upcoming) is not None:
                upcoming = asyncio.ensure_future(asyncio.to_thread(next, pending, None))
                made += len(block)
                await produce_batched(
                    self.bootstrap, self.settings.events_topic, block, self.args.partitions
                )
                if count > len(block):
                    print(f"  produced {made:,} of {count:,} events", flush=True)
            got, first, last = await reader
            if got < count:
                raise RuntimeError(f"{got} of {count} verdicts within {deadline} s")
            self.usage = usage.between(first, last, count)
            return count / max(1e-6, last - first)
        finally:
            sampler.cancel()

    async def wait_ready(self, deadline: float, worker: Any = None) -> tuple[float, int, float]:
        """Seconds until /ready (of the worker, or of `worker`), the most records a
        recovery said it had to restore, and the seconds from the first answer that showed
        a recovery under way to /ready (the restore without the process's start-up; 0.0
        if none was seen)."""
        worker = worker or self.worker
        start, most, recovering = time.monotonic(), 0, None
        while time.monotonic() - start < deadline:
            status, document = await asyncio.to_thread(worker.get, "/ready")
            document = document or {}  # None: not serving yet
            progress = document.get("recovery") or {}
            if progress and recovering is None:
                recovering = time.monotonic()
            most = max(most, progress.get("to_restore", 0))
            if status == 200 and document.get("ready"):
                now = time.monotonic()
                return now - start, most, 0.0 if recovering is None else now - recovering
            await asyncio.sleep(0.05)  # polling the probe, not synchronisation
        raise RuntimeError(f"not ready within {deadline} s: {self.log_tail(worker)}")

    def sample(self, name: str) -> subprocess.Popen[bytes] | None:
        """`--py-spy DIR`: py-spy attached to the worker just started, its samples to
        DIR/`name`.txt (collapsed stacks)."""
        if not self.args.py_spy:
            return None
        out = Path(self.args.py_spy).resolve()
        out.mkdir(parents=True, exist_ok=True)
        spy = str(Path(sys.executable).with_name("py-spy"))
        command = [spy, "record", "--pid", str(self.worker.pid), "-r", "200"]
        # native frames need the process paused at each sample (py-spy refuses both)
        command += ["--native"] if self.args.py_spy_native else ["--nonblocking"]
        command += ["-f", "raw", "-o", str(out / f"{name}.txt")]
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def sampled(self, name: str, burst: Awaitable[float]) -> float:
        """`burst`'s rate, the worker sampled by py-spy meanwhile (`--py-spy DIR`)."""
        spy = self.sample(name)
        try:
            return await burst
        finally:
            stop_sampling(spy)

    def log_tail(self, worker: Any = None) -> str:
        return str((worker or self.worker).log_path.read_text(errors="replace")[-3000:])

    async def restart(
        self,
        name: str,
        empty: bool,
        seed: int,
        tree: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> str:
        self.worker.stop(signal.SIGKILL)
        if empty:
            shutil.rmtree(self.workdir / "data", ignore_errors=True)
        killed = time.monotonic()
        self.start(name, tree, extra)
        spy = self.sample(name)
        try:
            ready, restored, restoring = await self.wait_ready(3600)
        finally:
            stop_sampling(spy)
        try:  # the records read; offsets overstate them once compaction ran
            read: float | None = self.metric("loopwatch_recovery_records_read_total")
        except RuntimeError:  # a checkout (--tree) from before the counter
            read = None
        rate = ""
        if read is not None and restoring:
            rate = (
                f" by offset, {read:,.0f} read ({read / restoring:,.0f} records/s"
                f" over the {restoring:.1f} s restore)"
            )
        elif restored and restoring:
            rate = f" ({restored / restoring:,.0f} records/s over the {restoring:.1f} s restore)"
        sent, stamped, received = await self.probe()
        return (
            f"ready after {ready:.1f} s, first new verdict {received - killed:.1f} s after the "
            f"kill (its event sent {sent - killed:.1f} s after it, the verdict stamped "
            f"{(stamped - sent) * 1000:,.0f} ms after that), {restored:,} records restored{rate}"
        )

    async def probe(self) -> tuple[float, float, float]:
        """One new session's event produced now, and its verdict awaited: when the event
        was sent, when the worker stamped the verdict (its record's timestamp), and when
        the verdict was received (`time.monotonic()` all three). A reader of its own,
        polling: `process`'s waits up to 500 ms for a fetch to fill, which a single
        verdict never does."""
        # a session of its own: the sessions loaded stay as the loading worker wrote
        # them, for the next restart (another checkout may write another record format)
        key, value = _probe_event(f"probe-{self.produced}")
        self.produced += 1
        ready = asyncio.Event()
        reader = asyncio.create_task(
            collect(
                self.bootstrap,
                self.settings.verdicts_topic,
                self.settings.verdict_partitions,
                1,
                deadline=120,
                ready=ready,
                key=key,
            )
        )
        await ready.wait()
        # monotonic and wall clocks read together: the verdict's timestamp is wall time
        sent, sent_wall = time.monotonic(), time.time()
        await produce_batched(
            self.bootstrap, self.settings.events_topic, [(key, value)], self.args.partitions
        )
        got = await reader
        if not got:
            raise RuntimeError(f"no verdict of the probe in 120 s: {self.log_tail()}")
        received_wall, record = got[0]
        stamped = sent + (record.timestamp / 1000 - sent_wall)
        return sent, stamped, sent + (received_wall - sent_wall)


def small_sessions(sessions: int, per_session: int, seed: int) -> list[tuple[bytes, bytes]]:
    """`sessions` open sessions of `per_session` short user messages (`--expire`: cheap
    to make and to load, where `open_sessions`' realistic ones take minutes at 100k)."""
    lines = []
    for seq in range(per_session):
        for n in range(sessions):
            session = f"idle-{seed}-{n:06d}"
            event = {
                "v": 1,
                "session_id": session,
                "agent_id": "scale-bench",
                "seq": seq,
                "ts": f"2026-12-02T12:00:{seq % 60:02d}+00:00",
                "type": "user_message",
                "text": f"step {seq} of session {n}",
            }
            lines.append((session.encode(), json.dumps(event).encode()))
    return lines


def triggers(partitions: int) -> list[tuple[bytes, bytes]]:
    """One new session's event per partition (a record that sweeps it), then the probe."""
    choose, every = DefaultPartitioner(), list(range(partitions))
    by_partition: dict[int, str] = {}
    n = 0
    while len(by_partition) < partitions:
        by_partition.setdefault(choose(f"trigger-{n}".encode(), every, every), f"trigger-{n}")
        n += 1
    lines = []
    for session in [*by_partition.values(), "probe"]:
        event = {
            "v": 1,
            "session_id": session,
            "agent_id": "scale-bench",
            "seq": 0,
            "ts": "2026-12-02T12:00:00+00:00",
            "type": "user_message",
            "text": "hello",
        }
        lines.append((session.encode(), json.dumps(event).encode()))
    return lines


async def mass_expiry(run: Run, n: int, seed: int, idle_rss: int) -> None:
    """`--expire` (module docstring)."""
    args = run.args
    mib = 2**20
    load = small_sessions(n, args.events_per_session, seed)
    rate = await run.process(load, deadline=3600)
    loaded_at = time.time()
    print(
        f"load: {len(load):,} events at {rate:,.0f} events/s (TTL {run.ttl} s); {load_line()}",
        flush=True,
    )
    await asyncio.sleep(3 * run.settings.commit_interval_ms / 1000)  # bench pause: commits
    loaded_rss = rss_bytes(run.worker.pid)
    if time.time() - loaded_at > run.ttl:
        print("warning: the load took longer than the TTL", flush=True)
    await asyncio.sleep(max(0.0, loaded_at + run.ttl + 1.5 - time.time()))  # the TTL passes
    sessions_before = run.metric("loopwatch_active_sessions")
    lines = triggers(args.partitions)
    ready = asyncio.Event()
    reader = asyncio.create_task(
        collect(
            run.bootstrap,
            run.settings.verdicts_topic,
            run.settings.verdict_partitions,
            len(lines),
            deadline=600,
            ready=ready,
        )
    )
    await ready.wait()
    sent = time.time()
    await produce_batched(run.bootstrap, run.settings.events_topic, lines, args.partitions)
    got = await reader
    delays = {record.key.decode(): received - sent for received, record in got}
    left = n
    while left > len(lines):
        left = int(run.metric("loopwatch_active_sessions"))
        swept = time.time() - sent
        await asyncio.sleep(0.1)  # polling the gauge, not synchronisation
    trigger_delays = [delay for key, delay in delays.items() if key != "probe"]
    print(
        f"mass expiry of {sessions_before:,.0f} sessions: the probe's verdict after "
        f"{delays['probe']:.3f} s, the triggers' after {min(trigger_delays):.3f}-"
        f"{max(trigger_delays):.3f} s; all swept within {swept:.1f} s; {load_line()}",
        flush=True,
    )
    await asyncio.sleep(3 * run.settings.commit_interval_ms / 1000)  # the tombstones' commits
    expired_rss = rss_bytes(run.worker.pid)
    again = small_sessions(n, args.events_per_session, seed + 1)
    await run.process(again, deadline=3600)
    await asyncio.sleep(3 * run.settings.commit_interval_ms / 1000)
    refilled_rss = rss_bytes(run.worker.pid)
    print(
        f"RSS: idle {idle_rss / mib:,.0f} MiB, loaded {loaded_rss / mib:,.0f} MiB, after the "
        f"sweep {expired_rss / mib:,.0f} MiB ({(loaded_rss - expired_rss) / mib:+,.0f} given "
        f"back), refilled with {n:,} new sessions {refilled_rss / mib:,.0f} MiB "
        f"({(refilled_rss - expired_rss) / mib:+,.0f} against "
        f"{(loaded_rss - idle_rss) / mib:+,.0f} for the first load); {load_line()}",
        flush=True,
    )


def stop_sampling(spy: subprocess.Popen[bytes] | None) -> None:
    """Stop a `Run.sample` py-spy (None: none was started); it writes its samples first."""
    if spy is not None:
        spy.send_signal(signal.SIGINT)  # py-spy writes its samples and exits
        spy.wait(timeout=120)


def variants(specs: list[str]) -> list[tuple[str, str, dict[str, str]]]:
    """`--variant LABEL=TREE[:VAR=VALUE,...]`: a checkout and settings of its own each."""
    out = []
    for spec in specs:
        label, _, rest = spec.partition("=")
        tree, _, settings = rest.partition(":")
        extra = dict(item.split("=", 1) for item in settings.split(",") if item)
        out.append((label, str(Path(tree or ".").resolve()), extra))
    return out


async def hot_and_cold_variants(run: Run, n: int, seed: int, first_step: int = 0) -> None:
    """Hot and cold bursts from each `--variant`'s worker in turn (`--rounds` times),
    over the same open sessions: each variant's worker is started on the loading
    worker's data dir after a clean stop (SIGTERM: it commits) of the one before, and
    waits for `/ready` before its bursts. Each burst continues the sessions after the
    previous ones' `seq`s, so every event is new (`first_step`: bursts already sent).
    With `--py-spy DIR` each burst is sampled (DIR/LABEL-ROUND-hot.txt, ...-cold.txt)."""
    args = run.args
    burst = args.burst
    rates: dict[str, list[tuple[float, float]]] = {}
    step = first_step
    for round_ in range(args.rounds):
        for label, tree, extra in variants(args.variant):
            run.worker.stop(signal.SIGTERM)
            run.start(f"{label}-{round_}", tree, extra)
            await run.wait_ready(3600)
            hot = continued(min(HOT_SESSIONS, n), burst, seed, offset=2 * step * burst)
            cold = continued(n, burst, seed, offset=(2 * step + 1) * burst)
            step += 1
            name = f"{label}-{round_ + 1}"
            hot_rate = await run.sampled(f"{name}-hot", run.process(hot, deadline=1800))
            hot_usage = run.usage
            cold_rate = await run.sampled(f"{name}-cold", run.process(cold, deadline=1800))
            rates.setdefault(label, []).append((hot_rate, cold_rate))
            print(
                f"  round {round_ + 1} {label}: hot ({min(HOT_SESSIONS, n)} sessions) "
                f"{hot_rate:,.0f} events/s ({hot_usage}); cold (spread over {n:,}) "
                f"{cold_rate:,.0f} events/s ({run.usage}); {load_line()}",
                flush=True,
            )
    for label, figures in rates.items():
        hots = sorted(h for h, _ in figures)
        colds = sorted(c for _, c in figures)
        print(
            f"{label}: hot median {hots[len(hots) // 2]:,.0f} events/s "
            f"({', '.join(f'{h:,.0f}' for h, _ in figures)}); cold median "
            f"{colds[len(colds) // 2]:,.0f} ({', '.join(f'{c:,.0f}' for _, c in figures)})",
            flush=True,
        )


async def hot_and_cold(run: Run, n: int, seed: int) -> None:
    """`--burst` events over few sessions (hot), then as many spread one per session over
    the `n` open ones (cold), from the loading worker (sampled with `--py-spy DIR`);
    `--bare-agent`: then the bare faust agent over the hot burst's records."""
    burst = run.args.burst
    hot = continued(min(HOT_SESSIONS, n), burst, seed, offset=0)
    cold = continued(n, burst, seed, offset=burst)
    run.produced = 2 * burst
    hot_rate = await run.sampled("hot", run.process(hot, deadline=1800))
    hot_usage = run.usage
    cold_rate = await run.sampled("cold", run.process(cold, deadline=1800))
    print(
        f"hot ({min(HOT_SESSIONS, n)} sessions): {hot_rate:,.0f} events/s ({hot_usage}); "
        f"cold (spread over {n:,}): {cold_rate:,.0f} events/s, {cold_rate / hot_rate:.2f}x "
        f"({run.usage}); {load_line()}",
        flush=True,
    )
    if run.args.bare_agent:
        await bare_agent_over(run, hot, hot_rate)


async def bare_agent_over(run: Run, lines: list[tuple[bytes, bytes]], worker_rate: float) -> None:
    """The bare faust agent (ops/bench/bare_agent.py) over `lines` (a burst's records),
    produced into an events topic of their own before it starts: events/s from its first
    to its last record, against the worker's `worker_rate` over the same records."""
    env = worker_env(run.bootstrap, new_prefix(), run.args.partitions)
    settings = Settings.from_env(env)
    await create_topics(settings)
    await produce_batched(run.bootstrap, settings.events_topic, lines, run.args.partitions)
    marks, usage = await run_bare_agent(
        run.bootstrap, settings.events_topic, len(lines), run.workdir
    )
    rate = len(lines) / max(1e-9, marks["last"] - marks["first"])
    print(
        f"bare faust agent over the hot burst's records: {rate:,.0f} events/s "
        f"({usage.between(marks['first'], marks['last'], len(lines))}); the worker's hot burst "
        f"{worker_rate / rate:.2f}x it; {load_line()}",
        flush=True,
    )


async def takeover_run(run: Run) -> None:
    """`--takeover` (`scale_takeover.py`), then the logs' summary and the clean-up."""
    # (imported here: it imports this module)
    from scale_takeover import takeover  # noqa: PLC0415

    try:
        await takeover(run, run.args.sessions, run.args.seed)
    finally:
        print(log_summary(run.workdir), flush=True)
        await delete_run_topics(run.bootstrap, run.args.partitions)
        if run.args.keep:
            print(f"kept: {run.workdir}")
        else:
            shutil.rmtree(run.workdir, ignore_errors=True)


async def main_async(args: argparse.Namespace) -> None:
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    workdir = Path(args.workdir or f"/tmp/lw-scale-{uuid.uuid4().hex[:6]}")
    workdir.mkdir(parents=True, exist_ok=True)
    run = Run(args, bootstrap, workdir)
    await create_topics(run.settings)
    n, seed = args.sessions, args.seed
    print(
        f"scale bench ({args.tree or REPO}): {n:,} open sessions x {args.events_per_session} "
        f"events, {args.store}, {args.partitions} partitions; {load_line()}",
        flush=True,
    )
    if args.takeover:
        await takeover_run(run)
        return
    run.start("worker")
    try:
        await run.wait_ready(300)
        idle_rss = rss_bytes(run.worker.pid)
        if args.expire:
            await mass_expiry(run, n, seed, idle_rss)
            return
        load = Fleet(n, args.events_per_session, seed)
        rate = await run.load(load, deadline=4 * 3600)
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
        if args.burst and args.variant:
            if args.loading_burst:  # the worker that loaded them first, then the variants
                await hot_and_cold(run, n, seed)
            await hot_and_cold_variants(run, n, seed, first_step=1 if args.loading_burst else 0)
        elif args.burst:  # (--burst 0: no hot/cold measurement)
            await hot_and_cold(run, n, seed)
        if not args.skip_recovery:
            if args.store.startswith("rocksdb"):
                same = await run.restart("restart-same-dir", empty=False, seed=seed)
                print(f"kill -9, restart on its data dir: {same}; {load_line()}", flush=True)
            for round_ in range(args.restore_rounds):
                for store in args.restore_store or [args.store]:
                    for tree in [args.tree, *args.restore_also]:
                        label = f"{Path(tree or REPO).name}, {store}"
                        name = f"restart-empty-dir-{round_}-{Path(tree or REPO).name}-{store[:-3]}"
                        fresh = await run.restart(
                            name, empty=True, seed=seed, tree=tree, extra={"LOOPWATCH_STORE": store}
                        )
                        print(
                            f"kill -9, restart without local state ({label}): {fresh}; "
                            f"{load_line()}",
                            flush=True,
                        )
    finally:
        if run.worker is not None:
            run.worker.stop(signal.SIGTERM)
        print(log_summary(workdir), flush=True)
        await delete_run_topics(bootstrap, args.partitions)
        if args.keep:
            print(f"kept: {workdir}")
        else:
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
    parser.add_argument("--expire", action="store_true", help="measure a mass expiry instead")
    parser.add_argument(
        "--takeover",
        action="store_true",
        help="two workers; kill -9 one and time the survivor's take-over, from a standby "
        "and without one (scale_takeover.py)",
    )
    parser.add_argument("--ttl", type=float, default=None, help="--expire: the idle TTL (s)")
    parser.add_argument(
        "--rocksdb-cache-mb",
        type=int,
        default=None,
        help="the worker's LOOPWATCH_ROCKSDB_CACHE_MB (a small cache is full at a small N, "
        "so two N then give the per-session cost without the cache's growth in it)",
    )
    parser.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="VAR=VALUE",
        help="a setting of every worker of the run (repeatable), e.g. LOOPWATCH_SESSION_CACHE=0",
    )
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the workdir (logs, data)")
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
    parser.add_argument(
        "--restore-store",
        action="append",
        default=[],
        metavar="STORE",
        help="restart without local state with this store (repeatable; default --store): "
        "one load, the restore of each store from the same changelog",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=TREE[:VAR=VALUE,...]",
        help="hot and cold bursts from each of these workers in turn over the same loaded "
        "sessions (repeatable; an A/B in one run), e.g. before=/work/main "
        "after=.:LOOPWATCH_BATCH_HAND_OFF=true",
    )
    parser.add_argument("--rounds", type=int, default=1, help="with --variant: rounds")
    parser.add_argument(
        "--loading-burst",
        action="store_true",
        help="with --variant: the hot and cold bursts from the worker that loaded the "
        "sessions first (a long-running worker against freshly started ones)",
    )
    parser.add_argument(
        "--bare-agent",
        action="store_true",
        help="after the loading worker's hot burst, the bare faust agent (bare_agent.py) over "
        "the same records, in a topic of their own (the worker's hot rate against it)",
    )
    parser.add_argument(
        "--py-spy",
        default=None,
        metavar="DIR",
        help="sample each restart, and the hot and cold bursts, with py-spy (in the venv) into DIR",
    )
    parser.add_argument(
        "--py-spy-native",
        action="store_true",
        help="with --py-spy: sample native frames too (pauses the worker at each sample; "
        "without it, frames under native calls such as RocksDB's can be misattributed)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
