"""`LoopwatchClient`: what an agent runtime process opens once and shares by its sessions.

    async with LoopwatchClient(bootstrap_servers="broker:9092") as client:
        async with await client.open_session("s-42") as session:
            await session.user("fix the build", message_index=0)
            ...
            wait = await session.verdicts()          # before each model call
            prompt = place_openai(history, session.warnings_by_message())

Nothing in the agent's call path raises or hangs because of Kafka (docs/client.md,
"Fail-open and the circuit breaker"): the client connects in the background and retries
every `probe_interval`; publishing appends to one bounded buffer that a background sender
delivers; a verdict wait that times out returns what it has (docs/contract.md §6); after
`failure_threshold` consecutive failures the circuit opens and waits return at once
until verdicts flow again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from loopwatch.streams.client.breaker import CircuitBreaker
from loopwatch.streams.client.claim import runtime_group
from loopwatch.streams.client.encoding import EventEncoder
from loopwatch.streams.client.history import Format, ToolError
from loopwatch.streams.client.link import KafkaLink, wake
from loopwatch.streams.client.outbox import Outbox, Outgoing
from loopwatch.streams.client.reader import VerdictReader
from loopwatch.streams.client.session import Session
from loopwatch.streams.client.stats import ClientStats
from loopwatch.streams.client.tracker import HistoryTracker

if TYPE_CHECKING:
    from loopwatch.streams.settings import Settings

log = logging.getLogger(__name__)

LINK_STOP_GRACE = 5.0
"""Seconds beyond `close_timeout` that `close()` waits for its cancelled link to stop."""


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
        failure_threshold: int = 3,
        probe_interval: float = 2.0,
        max_buffered: int = 10_000,
        close_timeout: float = 2.0,
        registry: Any = None,
        reply_partitions: bool = True,
        runtime_group: str | None = None,
    ) -> None:
        """`kafka_options`: extra aiokafka keyword arguments (security, client id, ...).
        `local_fingerprints`: send fingerprints instead of raw content (docs/contract.md §3).
        `log_timeouts`: log each verdict wait that gives up (they are counted either way).
        The circuit breaker (docs/client.md): `failure_threshold` consecutive failures open
        it; `probe_interval` is the retry period of connecting and delivering and the
        least time it stays open; `max_buffered` events wait for delivery at most (the
        oldest are dropped beyond); `close_timeout` bounds how long `close()` delivers.
        `registry`: a prometheus_client `CollectorRegistry` to expose the client's
        counters in (opt-in; prometheus_client is not a dependency of the client).
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
        self.probe_interval = probe_interval
        self.close_timeout = close_timeout
        self.breaker = CircuitBreaker(failure_threshold, probe_interval)
        self._stats = ClientStats(circuit=self.breaker.stats)
        self._outbox = Outbox(max_buffered, self._stats)
        self._clock = clock
        self.reply_partitions = reply_partitions
        self.runtime_group = runtime_group or _default_group(verdicts_topic)
        self._linking: asyncio.Task[None] | None = None
        self._closing = False
        self._sessions: dict[str, Session] = {}
        self._link = KafkaLink(
            options={**(kafka_options or {}), "bootstrap_servers": bootstrap_servers},
            events_topic=events_topic,
            verdicts_topic=verdicts_topic,
            runtime_group=self.runtime_group if reply_partitions else None,
            breaker=self.breaker,
            outbox=self._outbox,
            stats=self._stats,
            sessions=self._sessions,
            probe_interval=probe_interval,
            close_timeout=close_timeout,
        )
        self._trackers: dict[str, HistoryTracker] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop the client was started on (adapters of sync frameworks use it)."""
        if registry is not None:
            # only now: prometheus_client is not a dependency of the client
            from loopwatch.streams.client.prometheus import (  # noqa: PLC0415
                register_client_metrics,
            )

            register_client_metrics(self, registry)

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
        await self.close()

    @property
    def stats(self) -> ClientStats:
        """The client's counts (one live object; `circuit` is the breaker's)."""
        stats = self._stats
        reader = self._link.reader
        reader_bad = reader.bad_records if reader is not None else 0
        stats.bad_records = self._link.retired_bad_records + reader_bad
        stats.connected = reader is not None
        return stats

    async def start(self) -> None:
        """Start connecting in the background and return at once (never raises)."""
        if self._linking is None:
            self.loop = asyncio.get_running_loop()
            self._linking = asyncio.create_task(self._link.run(), name="loopwatch-client-link")

    async def connect(self, timeout: float | None = None) -> bool:
        """`start()`, then wait until connected, at most `timeout` seconds (None: until
        connected or closed). True when connected; never raises."""
        await self.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._link.reader is None and not self._closing:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            await asyncio.wait([self._connected_future()], timeout=left)
        return self._link.reader is not None

    async def close(self) -> None:
        """Deliver what is buffered for at most `close_timeout` (not at all while the
        circuit is open), count what is left as dropped, disconnect. Never raises."""
        if self._closing:
            return
        self._closing = True
        wake(self._link.connected_waiters)
        for session in list(self._sessions.values()):
            session.close()
        link = self._link
        if link.reader is not None and not self.breaker.is_open:
            deadline = time.monotonic() + self.close_timeout
            while (len(self._outbox) or link.in_flight) and time.monotonic() < deadline:
                await asyncio.wait([self._delivered_future()], timeout=deadline - time.monotonic())
        linking = self._linking
        if linking is not None:
            linking.cancel()
            # bounded: a link that will not stop is left behind, never waited on for ever
            done, _ = await asyncio.wait({linking}, timeout=self.close_timeout + LINK_STOP_GRACE)
            if not done:
                log.warning(
                    "loopwatch's Kafka link did not stop within %.1fs; closing without it",
                    self.close_timeout + LINK_STOP_GRACE,
                )
            elif not linking.cancelled():
                linking.exception()  # retrieved: the link logs its own failures
        self._stats.dropped += len(link.in_flight)
        link.in_flight = []
        self._outbox.drop_all()
        await link.disconnect()

    stop = close  # the earlier name

    def _connected_future(self) -> asyncio.Future[None]:
        future = self._watch_future()
        self._link.connected_waiters.append(future)
        return future

    def _delivered_future(self) -> asyncio.Future[None]:
        future = self._watch_future()
        self._link.delivered_waiters.append(future)
        return future

    def _watch_future(self) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()

    @property
    def reader(self) -> VerdictReader:
        reader = self._link.reader
        if reader is None:
            raise RuntimeError("the client is not connected (yet)")
        return reader

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
            breaker=self.breaker,
        )
        if self._sessions.get(session_id) is not None:
            raise ValueError(f"session {session_id!r} is already open in this client")
        if self._linking is None and not self._closing:
            await self.start()  # lazily, in the background
        if self._link.reader is not None:
            self._link.reader.watch(session_id, session.on_verdict)
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
        if self._link.reader is not None:
            self._link.reader.unwatch(session.session_id)

    async def _publish(self, session_id: str, record: bytes) -> asyncio.Future[Any] | None:
        """Append to the buffer; the background sender delivers it (never blocks)."""
        delivered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._outbox.append(Outgoing(session_id.encode("utf-8"), record, delivered))
        return delivered


def _default_group(verdicts_topic: str) -> str:
    return runtime_group(verdicts_topic)
