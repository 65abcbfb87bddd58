"""The real app with the memory store and recording outputs in place of the Kafka
producer (no broker): records are handed to the app's per-record processing as the
consumer's fetch loop hands them over (`streams.kafka.faust_ext.inline`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from faust.types import Message

from loopwatch.models import AgentEvent
from loopwatch.streams.kafka.outputs import Headers, OnDelivered
from loopwatch.streams.settings import Settings
from loopwatch.streams.worker.app import create_app
from tests.stream.settings_for_tests import stream_settings


@dataclass
class Sent:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None
    partition: int | None = None
    """The partition asked for (a verdict's reply partition); None: by key."""


@dataclass
class RecordingOutputs:
    """`streams.kafka.outputs.Outputs` that records each record under its topic's role
    (verdicts, warnings, dead_letters, changelog) and acknowledges it at once, or holds
    the acknowledgement while `hold_acks` is set."""

    names: dict[str, str]
    sent: list[Sent] = field(default_factory=list)
    hold_acks: bool = False
    pending: list[asyncio.Future[Any]] = field(default_factory=list)

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        headers: Headers | None = None,
        on_delivered: OnDelivered | None = None,
        partition: int | None = None,
    ) -> None:
        self.sent.append(
            Sent(self.names[topic], key, value, list(headers) if headers else None, partition)
        )
        if on_delivered is None:
            return
        offset = len(self.sent) - 1
        if not self.hold_acks:
            on_delivered(offset)
            return
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda _: on_delivered(offset))
        self.pending.append(future)

    def add_changelog(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        self.sent.append(Sent("changelog", key, value, None))

    async def flush(self) -> None:
        """Everything recorded is "stored" already."""


def _recording_outputs(settings: Settings) -> RecordingOutputs:
    return RecordingOutputs(
        {
            settings.verdicts_topic: "verdicts",
            settings.warnings_topic: "warnings",
            settings.dlq_topic: "dead_letters",
            settings.episodes_topic: "episodes",
        }
    )


@dataclass
class Harness:
    app: Any
    outputs: RecordingOutputs
    offset: int = 0

    @property
    def sent(self) -> list[Sent]:
        """Records sent to the output topics (changelog records excluded)."""
        return [s for s in self.outputs.sent if s.topic != "changelog"]

    @property
    def changelog(self) -> list[Sent]:
        """Changelog records, as the next offset commit leaves them (the session store
        writes each session's newest record once per commit)."""
        self.commit_writes()
        return self.on("changelog")

    def commit_writes(self) -> None:
        """What an offset commit does first: write the sessions' noted records."""
        self.app.loopwatch_store.write_pending()

    @property
    def pending(self) -> list[asyncio.Future[Any]]:
        return self.outputs.pending

    @property
    def hold_acks(self) -> bool:
        return self.outputs.hold_acks

    @hold_acks.setter
    def hold_acks(self, hold: bool) -> None:
        """When set, verdict sends stay unacknowledged (a broker that has not answered)."""
        self.outputs.hold_acks = hold

    async def put(
        self, value: bytes | None, key: bytes | None = None, log_time: float | None = None
    ) -> None:
        """One record of the events topic (partition 0, the next offset), processed.
        `log_time`: its Kafka timestamp (the idle sweep's clock) and the worker's clock
        when it reads it, by default now."""
        topic = self.app.loopwatch_topics.events.get_topic_name()
        stamp = time.time() if log_time is None else log_time
        # The worker reads it at once: its clock is that time.
        self.app.loopwatch_handler.clock = (
            (lambda: datetime.now(UTC))
            if log_time is None
            else (lambda: datetime.fromtimestamp(stamp, UTC))
        )
        message = Message(topic, 0, self.offset, stamp, 0, [], key, value, None)
        self.offset += 1
        await self.app.loopwatch_handle_fetched(message)

    async def put_event(self, event: AgentEvent, log_time: float | None = None) -> None:
        await self.put(
            event.model_dump_json().encode(), key=event.session_id.encode(), log_time=log_time
        )

    async def put_published(self, event: AgentEvent) -> None:
        """`put_event` stamped as published when it happened: `seq` seconds after a start
        hours before now (tests.support.builders times events by `seq` likewise), so
        the log clock moves as its event time does."""
        await self.put_event(event, log_time=self.published_from + event.seq)

    published_from: float = field(default_factory=lambda: time.time() - 6 * 3600)

    def on(self, topic: str) -> list[Sent]:
        return [s for s in self.outputs.sent if s.topic == topic]

    @property
    def table(self) -> Any:
        """The sessions table as the next offset commit leaves it."""
        self.commit_writes()
        return self.app.loopwatch_table

    def metrics_text(self) -> str:
        text: str = self.app.loopwatch_metrics.exposition().decode()
        return text


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {}


@pytest.fixture
async def harness_factory(
    settings_overrides: dict[str, Any],
) -> AsyncIterator[Callable[[], Awaitable[Harness]]]:
    """Start harnesses (each a fresh app, like a fresh worker process) on demand."""

    async def start() -> Harness:
        settings = stream_settings(**settings_overrides)
        outputs = _recording_outputs(settings)
        app = create_app(settings, outputs=outputs)
        app.finalize()
        return Harness(app, outputs)

    yield start


@pytest.fixture
async def harness(harness_factory: Callable[[], Awaitable[Harness]]) -> Harness:
    return await harness_factory()
