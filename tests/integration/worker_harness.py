"""Run `loopwatch worker` as a subprocess against a real broker, with topics and an app id
of its own per test, and talk to its topics with plain aiokafka clients."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from loopwatch.models import AgentEvent, DetectionConfig
from loopwatch.streams.demo.naming import isolated_env
from loopwatch.streams.demo.ports import free_ports
from loopwatch.streams.demo.worker_process import WorkerFailed
from loopwatch.streams.demo.worker_process import WorkerProcess as ChildProcess
from loopwatch.streams.kafka.admin import create_topics
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.settings import Settings
from tests.support.builders import SessionBuilder
from tests.support.kafka_broker import batch_hand_off_env

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_MARGIN_SECONDS = 30.0
"""Interpreter start-up, imports, topic check and recovery on a loaded 2-core machine."""


def failover_deadline(settings: Settings) -> float:
    """How long to wait for the verdicts of a worker that replaces a killed one: the group
    drops the dead member within the session timeout, the rebalance that follows takes at
    most the rebalance timeout, plus the new worker's start-up."""
    timeouts_ms = settings.session_timeout_ms + settings.rebalance_timeout_ms
    return timeouts_ms / 1000 + STARTUP_MARGIN_SECONDS


UNIQUE_ENVS: list[WorkerEnv] = []
"""The `WorkerEnv`s made so far: tests/integration/conftest.py deletes their topics after
each test module, so a developer's broker does not fill up."""


@dataclass(frozen=True)
class WorkerEnv:
    """Unique topics and app id for one test; `env()` is the worker's environment."""

    bootstrap: str
    prefix: str
    partitions: int = 3
    extra: tuple[tuple[str, str], ...] = ()

    @classmethod
    def unique(cls, bootstrap: str, **kwargs: Any) -> WorkerEnv:
        env = cls(bootstrap, f"lw-it-{uuid.uuid4().hex[:10]}", **kwargs)
        UNIQUE_ENVS.append(env)
        return env

    @property
    def events(self) -> str:
        return self.settings().events_topic

    @property
    def verdicts(self) -> str:
        return self.settings().verdicts_topic

    @property
    def warnings(self) -> str:
        return self.settings().warnings_topic

    @property
    def dlq(self) -> str:
        return self.settings().dlq_topic

    @property
    def config(self) -> str:
        return self.settings().config_topic

    @property
    def episodes(self) -> str:
        return self.settings().episodes_topic

    @property
    def changelog(self) -> str:
        return self.settings().changelog_topic

    def env(self, web_port: int) -> dict[str, str]:
        data_dir = Path(f"/tmp/{self.prefix}")
        env = isolated_env(self.bootstrap, self.prefix, self.partitions, web_port, data_dir)
        env.update(batch_hand_off_env())  # TEST_BATCH_HAND_OFF=0: the suite per record
        env.update(self.extra)  # may override any of the above (e.g. LOOPWATCH_DATA_DIR)
        return env

    def settings(self) -> Settings:
        return Settings.from_env(self.env(web_port=6066))

    async def create_topics(self) -> None:
        """As the worker does at start-up, so producers need not wait for it."""
        await create_topics(self.settings())


class WorkerProcess(ChildProcess):
    """One `loopwatch worker` (or `command`), started at once; its output goes to a log
    file whose excerpt a failure shows."""

    def __init__(
        self,
        env: WorkerEnv,
        log_dir: Path,
        name: str = "worker",
        command: str = "worker",
        worker_id: str | None = None,
    ) -> None:
        self.web_port = free_ports()
        own = {} if worker_id is None else {"LOOPWATCH_WORKER_ID": worker_id}
        # the otel-bridge has a web port setting of its own
        child_env = {**env.env(self.web_port), "LOOPWATCH_OTEL_WEB_PORT": str(self.web_port), **own}
        super().__init__(
            Settings.from_env(child_env),
            log_dir / f"{name}.log",
            os.environ.get("LW_TEST_LOGLEVEL", "info"),
            command=command,
            env=child_env,
            cwd=REPO_ROOT,
        )
        self.start()

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        assert self._process is not None
        return self._process

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        return super().stop(sig, timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_excerpt(self, tail: int = 3000) -> str:
        """The log's first traceback (a crash at start-up scrolls out of the tail) and
        its last `tail` characters, for a failure message."""
        return log_excerpt(self.log(), tail)

    def failed(self, message: str) -> WorkerFailed:
        return WorkerFailed(f"{message}; log:\n{self.log_excerpt()}")


def log_excerpt(text: str, tail: int = 3000, traceback_lines: int = 40) -> str:
    """`text`'s first traceback, if it is not within the last `tail` characters, then
    those characters."""
    start = text.find("Traceback (most recent call last)")
    if start == -1 or start >= len(text) - tail:
        return text[-tail:]
    first = "\n".join(text[start:].splitlines()[:traceback_lines])
    return f"first traceback:\n{first}\n...\nlast {tail} characters:\n{text[-tail:]}"


async def produce(
    bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    await producer.start()
    try:
        for key, value in records:
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


async def until_worker_clock_passes(verdict: dict[str, Any], seconds: float) -> None:
    """Wait until the worker's clock (read from `verdict`'s `evaluated_at`; the worker
    runs on this machine) is `seconds` past that verdict. A sweep test needs its session's
    idle TTL to pass in the worker's time as well as on the log (docs/contract.md §8.5);
    its TTL is a second or two."""
    target = datetime.fromisoformat(verdict["evaluated_at"]).timestamp() + seconds
    await asyncio.sleep(max(0.0, target - time.time()))


def event_records(events: Iterable[AgentEvent]) -> list[tuple[bytes | None, bytes | None]]:
    return [(e.session_id.encode(), e.model_dump_json().encode()) for e in events]


async def consume(
    bootstrap: str,
    topic: str,
    *,
    until: int,
    deadline: float = 90.0,
    distinct: Callable[[Any], Hashable] | None = None,
) -> list[Any]:
    """Read `topic` from the start until `until` records (or, with `distinct`, records with
    that many distinct keys) arrived, or the deadline passed."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    records: list[Any] = []
    seen: set[Hashable] = set()
    try:
        end = time.monotonic() + deadline
        while (len(seen) if distinct else len(records)) < until and time.monotonic() < end:
            batches = await consumer.getmany(timeout_ms=500)
            for batch in batches.values():
                records.extend(batch)
                if distinct is not None:
                    seen.update(distinct(record) for record in batch)
    finally:
        await consumer.stop()
    return records


def verdict_key(record: Any) -> tuple[str, int]:
    verdict = json.loads(record.value)
    return verdict["session_id"], verdict["seq"]


def without_clock(value: bytes) -> dict[str, Any]:
    verdict: dict[str, Any] = json.loads(value)
    verdict.pop("evaluated_at")
    return verdict


def scan_verdicts(events: Sequence[AgentEvent]) -> dict[tuple[str, int], dict[str, Any]]:
    """What `loopwatch scan` gives for these events, by (session_id, seq), without clock."""
    expected = {}
    for verdict in Scanner(DetectionConfig()).run(events):
        document = verdict.model_dump(mode="json")
        document.pop("evaluated_at")
        expected[verdict.session_id, verdict.seq] = document
    return expected


def loop_dense_stream(sessions: int, steps: int, seed: int = 7) -> list[AgentEvent]:
    """Many interleaved sessions that loop in every way the rules know, in random order
    across sessions and in seq order within each."""
    rng = random.Random(seed)
    builders = [SessionBuilder(f"syn-{n:04d}", agent_id=f"agent-{n % 5}") for n in range(sessions)]
    queues: list[list[AgentEvent]] = []
    for b in builders:
        b.user("start")
        for i in range(steps):
            kind = rng.randrange(5)
            if kind == 0:
                b.step(("edit_file", {"path": "x.py", "old": "a", "new": "b"}))
                b.result(error="no match")
            elif kind == 1:
                b.step(("read_file", {"path": "y.py", "offset": rng.choice([0, 100])}))
                b.result(result="same text")
            elif kind == 2:
                b.step(("search", {"q": "loop"}), ("read_file", {"path": "z.py"}))
            elif kind == 3:
                b.text(f"thinking {i}")
            else:
                b.user("go on")
        if rng.random() < 0.3:
            b.end()
        queues.append(list(b.events))
    merged: list[AgentEvent] = []
    while queues:
        queue = rng.choice(queues)
        merged.append(queue.pop(0))
        if not queue:
            queues.remove(queue)
    return merged


def metric_value(page: str, name: str) -> float:
    """An unlabelled sample of a /metrics page (0.0 when the page lacks it)."""
    for line in page.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def metrics_page(web_port: int, ready: Callable[[str], bool], deadline: float = 30.0) -> str:
    """The worker's /metrics page once `ready(page)` holds (a timer or a commit may update
    it after the last verdict), or as it is at the deadline, for the assertion to show."""
    end = time.monotonic() + deadline
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/metrics") as page:
            metrics: str = page.read().decode()
        if ready(metrics) or time.monotonic() >= end:
            return metrics
        time.sleep(0.2)  # polling a page inside a deadline, not synchronisation
