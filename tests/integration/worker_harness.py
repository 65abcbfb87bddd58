"""Run `loopwatch worker` as a subprocess against a real broker, with topics and an app id
of its own per test, and talk to its topics with plain aiokafka clients."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from loopwatch.models import AgentEvent, DetectionConfig
from loopwatch.streams.demo.ports import free_ports
from loopwatch.streams.kafka.admin import create_topics
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.settings import Settings
from tests.support.builders import SessionBuilder

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
        return f"{self.prefix}-events"

    @property
    def verdicts(self) -> str:
        return f"{self.prefix}-verdicts"

    @property
    def warnings(self) -> str:
        return f"{self.prefix}-warnings"

    @property
    def dlq(self) -> str:
        return f"{self.prefix}-dlq"

    @property
    def config(self) -> str:
        return f"{self.prefix}-config"

    @property
    def episodes(self) -> str:
        return f"{self.prefix}-episodes"

    @property
    def changelog(self) -> str:
        return f"{self.prefix}-sessions-changelog"

    def env(self, web_port: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
        env.update(
            KAFKA_BOOTSTRAP_SERVERS=self.bootstrap,
            LOOPWATCH_APP_ID=self.prefix,
            LOOPWATCH_EVENTS_TOPIC=self.events,
            LOOPWATCH_VERDICTS_TOPIC=self.verdicts,
            LOOPWATCH_WARNINGS_TOPIC=self.warnings,
            LOOPWATCH_DLQ_TOPIC=self.dlq,
            LOOPWATCH_EPISODES_TOPIC=self.episodes,
            LOOPWATCH_CONFIG_TOPIC=self.config,
            LOOPWATCH_PARTITIONS=str(self.partitions),
            LOOPWATCH_WEB_PORT=str(web_port),
            LOOPWATCH_DATA_DIR=f"/tmp/{self.prefix}",
        )
        env.update(self.extra)  # may override any of the above (e.g. LOOPWATCH_DATA_DIR)
        return env

    def settings(self) -> Settings:
        return Settings.from_env(self.env(web_port=6066))

    async def create_topics(self) -> None:
        """As the worker does at start-up, so producers need not wait for it."""
        await create_topics(self.settings())


class WorkerProcess:
    """One `loopwatch worker`; its output goes to a log file printed when a test fails."""

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
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "loopwatch.streams.cli",
                command,
                "--loglevel",
                os.environ.get("LW_TEST_LOGLEVEL", "info"),
            ],
            # the otel-bridge has a web port setting of its own
            env={
                **env.env(self.web_port),
                "LOOPWATCH_OTEL_WEB_PORT": str(self.web_port),
                **own,
            },
            cwd=REPO_ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        self._log.close()
        return code

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_excerpt(self, tail: int = 3000) -> str:
        """The log's first traceback (a crash at start-up scrolls out of the tail) and
        its last `tail` characters, for a failure message."""
        return log_excerpt(self.log(), tail)

    def get(self, path: str) -> tuple[int, Any]:
        """(HTTP status, JSON body) of a page on the worker's web port; (0, None) while
        nothing answers."""
        url = f"http://127.0.0.1:{self.web_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as page:
                return page.status, json.loads(page.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, None

    def wait_ready(self, deadline: float = 90.0) -> dict[str, Any]:
        """Poll `/ready` until it answers 200 (the worker processes its partitions)."""
        end = time.monotonic() + deadline
        while True:
            status, document = self.get("/ready")
            if status == 200:
                return dict(document)
            if time.monotonic() > end or self.proc.poll() is not None:
                raise AssertionError(f"not ready: {document}; log:\n{self.log_excerpt()}")
            time.sleep(0.2)  # polling a probe against a deadline


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
