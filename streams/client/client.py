"""`LoopwatchClient`: what an agent runtime process opens once and shares by its sessions.

    async with LoopwatchClient(bootstrap_servers="broker:9092") as client:
        async with await client.open_session("s-42") as session:
            await session.user("fix the build", message_index=0)
            ...
            wait = await session.verdicts()          # before each model call
            prompt = place_openai(history, session.warnings_by_message())

Publishing and waiting never raise into the turn for broker trouble: a failed publish is
logged and counted, a verdict wait that times out returns what it has (docs/contract.md §6).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError

from loopwatch.models import reply_header
from loopwatch.streams.client.encoding import EventEncoder
from loopwatch.streams.client.history import Format, ToolError
from loopwatch.streams.client.reader import (
    FETCH_MAX_WAIT_MS,
    PartitionClaim,
    VerdictReader,
    runtime_group,
)
from loopwatch.streams.client.session import Session
from loopwatch.streams.client.stats import ClientStats
from loopwatch.streams.client.tracker import HistoryTracker

if TYPE_CHECKING:
    from loopwatch.streams.settings import Settings

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class LoopwatchClient:
    """Publishes events of many sessions and reads their verdicts (async context manager)."""

    def __init__(
        self,
        *,
        bootstrap_servers: str,
        events_topic: str = "agent-events",
        verdicts_topic: str = "loop-verdicts",
        agent_id: str | None = None,
        local_fingerprints: bool = False,
        verdict_timeout: float = 1.0,
        kafka_options: Mapping[str, Any] | None = None,
        log_timeouts: bool = True,
        clock: Callable[[], datetime] = _utc_now,
        reply_partitions: bool = True,
        runtime_group: str | None = None,
    ) -> None:
        """`kafka_options`: extra aiokafka keyword arguments (security, client id, ...).
        `local_fingerprints`: send fingerprints instead of raw content (docs/contract.md §3).
        `log_timeouts`: log each verdict wait that gives up (they are counted either way).
        `reply_partitions`: read only the verdict partitions this process claims in the
        consumer group `runtime_group` (default: one per verdicts topic) and name them
        in each event (docs/client.md, "Reply partitions"); False: read every partition
        (needs no group; for workers older than the reply-partition header)."""
        self.events_topic = events_topic
        self.verdicts_topic = verdicts_topic
        self.agent_id = agent_id
        self.local_fingerprints = local_fingerprints
        self.verdict_timeout = verdict_timeout
        self.log_timeouts = log_timeouts
        self.stats = ClientStats()
        self._clock = clock
        options = {**(kafka_options or {}), "bootstrap_servers": bootstrap_servers}
        # Idempotent with acks=all: a retried send is neither lost nor doubled, and the
        # events of a session stay in order (the app relies on it).
        self._producer = AIOKafkaProducer(**options, enable_idempotence=True, acks="all")
        # No group: partitions are assigned by hand, positions kept in memory.
        self._consumer = AIOKafkaConsumer(
            **options,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="latest",
            isolation_level="read_committed",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        self._options = options
        self.reply_partitions = reply_partitions
        self.runtime_group = runtime_group or _default_group(verdicts_topic)
        self._reader: VerdictReader | None = None
        self._sessions: dict[str, Session] = {}
        self._trackers: dict[str, HistoryTracker] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop the client was started on (adapters of sync frameworks use it)."""

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> LoopwatchClient:
        """A client for the broker and topics of the worker's settings."""
        kwargs = settings.aiokafka_kwargs()
        servers = kwargs.pop("bootstrap_servers")
        return cls(
            bootstrap_servers=servers,
            events_topic=settings.events_topic,
            verdicts_topic=settings.verdicts_topic,
            kafka_options=kwargs,
            **options,
        )

    async def __aenter__(self) -> LoopwatchClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self._producer.start()
        try:
            await self._consumer.start()
            partitions = await self._producer.partitions_for(self.verdicts_topic)
            reader = VerdictReader(
                self._consumer, self.verdicts_topic, len(partitions), self._claim()
            )
            await reader.start()
        except BaseException:
            await self._producer.stop()
            await self._consumer.stop()
            raise
        self._reader = reader

    def _claim(self) -> PartitionClaim | None:
        if not self.reply_partitions:
            return None
        member = AIOKafkaConsumer(
            **self._options,
            group_id=self.runtime_group,
            enable_auto_commit=False,
            auto_offset_reset="latest",
        )
        return PartitionClaim(member, self.verdicts_topic)

    async def stop(self) -> None:
        for session in list(self._sessions.values()):
            session.close()
        if self._reader is not None:
            await self._reader.stop()
        await self._consumer.stop()
        await self._producer.stop()  # flushes what is still buffered

    @property
    def reader(self) -> VerdictReader:
        if self._reader is None:
            raise RuntimeError("the client is not started (use `async with`)")
        return self._reader

    async def open_session(
        self, session_id: str, *, agent_id: str | None = None, first_seq: int = 0
    ) -> Session:
        """Start delivering the session's verdicts, then hand it out for publishing (no
        broker round trip: the reader already holds every verdict partition).

        `first_seq`: where a resumed session continues (above its last published seq).
        """
        encoder = EventEncoder(
            session_id=session_id,
            agent_id=agent_id if agent_id is not None else self.agent_id,
            local_fingerprints=self.local_fingerprints,
        )
        session = Session(
            session_id=session_id,
            encoder=encoder,
            publish=self._publish,
            on_close=self._forget,
            stats=self.stats,
            clock=self._clock,
            default_timeout=self.verdict_timeout,
            first_seq=first_seq,
            log_timeouts=self.log_timeouts,
        )
        self.reader.watch(session_id, session.on_verdict)
        self._sessions[session_id] = session
        return session

    async def tracker(
        self,
        session_id: str,
        fmt: Format,
        *,
        tool_error: ToolError | None = None,
        agent_id: str | None = None,
        first_seq: int = 0,
    ) -> HistoryTracker:
        """The history tracker of a session in one API's format, opening the session on
        first use (the framework adapters call this before every model call)."""
        tracker = self._trackers.get(session_id)
        if tracker is None:
            session = await self.session(session_id, agent_id=agent_id, first_seq=first_seq)
            tracker = HistoryTracker(session, fmt, tool_error=tool_error)
            self._trackers[session_id] = tracker
        return tracker

    async def session(
        self, session_id: str, *, agent_id: str | None = None, first_seq: int = 0
    ) -> Session:
        """The open session with this id, opened now if there is none."""
        session = self._sessions.get(session_id)
        if session is None:
            session = await self.open_session(session_id, agent_id=agent_id, first_seq=first_seq)
        return session

    async def end_session(self, session_id: str) -> None:
        """Publish `session_end` for a session opened by `tracker()` (no-op if unknown)."""
        session = self._sessions.get(session_id)
        if session is not None:
            await session.end()

    def _forget(self, session: Session) -> None:
        self._sessions.pop(session.session_id, None)
        self._trackers.pop(session.session_id, None)
        if self._reader is not None:
            self._reader.unwatch(session.session_id)

    async def _publish(self, session_id: str, record: bytes) -> asyncio.Future[Any] | None:
        reply = self._reader.stamp(session_id) if self._reader is not None else None
        try:
            delivery: asyncio.Future[Any] = await self._producer.send(
                self.events_topic,
                record,
                key=session_id.encode("utf-8"),
                headers=None if reply is None else [reply_header(reply)],
            )
        except KafkaError as exc:
            self._publish_failed(session_id, exc)
            return None
        self.stats.published += 1
        delivery.add_done_callback(lambda fut: self._delivered(session_id, fut))
        return delivery

    def _delivered(self, session_id: str, fut: Any) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            self._publish_failed(session_id, fut.exception())

    def _publish_failed(self, session_id: str, exc: BaseException) -> None:
        self.stats.publish_errors += 1
        log.warning("event of session %s not published: %s", session_id, type(exc).__name__)


def _default_group(verdicts_topic: str) -> str:
    return runtime_group(verdicts_topic)
