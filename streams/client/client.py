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
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from loopwatch.models import reply_header
from loopwatch.streams.client.breaker import CircuitBreaker
from loopwatch.streams.client.encoding import EventEncoder
from loopwatch.streams.client.history import Format, ToolError
from loopwatch.streams.client.outbox import Outbox, Outgoing
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

CONNECT_TIMEOUT = 15.0
"""The longest one connection attempt may take (it is a failure then, and retried)."""
PRODUCER_REQUEST_TIMEOUT_MS = 5000
"""How long the producer tries one delivery before giving up (then the breaker counts a
failure and the batch is retried after `probe_interval`); aiokafka's default is 40 s."""

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
        self._options = {**(kafka_options or {}), "bootstrap_servers": bootstrap_servers}
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self.reply_partitions = reply_partitions
        self.runtime_group = runtime_group or _default_group(verdicts_topic)
        self._reader: VerdictReader | None = None
        self._retired_bad_records = 0  # of readers of earlier connections
        self._link: asyncio.Task[None] | None = None
        self._in_flight: list[Outgoing] = []
        self._closing = False
        self._connected_waiters: list[asyncio.Future[None]] = []
        self._delivered_waiters: list[asyncio.Future[None]] = []
        self._sessions: dict[str, Session] = {}
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
        reader_bad = self._reader.bad_records if self._reader is not None else 0
        stats.bad_records = self._retired_bad_records + reader_bad
        stats.connected = self._reader is not None
        return stats

    async def start(self) -> None:
        """Start connecting in the background and return at once (never raises)."""
        if self._link is None:
            self.loop = asyncio.get_running_loop()
            self._link = asyncio.create_task(self._keep_linked(), name="loopwatch-client-link")

    async def connect(self, timeout: float | None = None) -> bool:
        """`start()`, then wait until connected, at most `timeout` seconds (None: until
        connected or closed). True when connected; never raises."""
        await self.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._reader is None and not self._closing:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            await asyncio.wait([self._connected_future()], timeout=left)
        return self._reader is not None

    async def close(self) -> None:
        """Deliver what is buffered for at most `close_timeout` (not at all while the
        circuit is open), count what is left as dropped, disconnect. Never raises."""
        if self._closing:
            return
        self._closing = True
        self._wake(self._connected_waiters)
        for session in list(self._sessions.values()):
            session.close()
        if self._reader is not None and not self.breaker.is_open:
            deadline = time.monotonic() + self.close_timeout
            while (len(self._outbox) or self._in_flight) and time.monotonic() < deadline:
                await asyncio.wait([self._delivered_future()], timeout=deadline - time.monotonic())
        if self._link is not None:
            self._link.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._link
        self._stats.dropped += len(self._in_flight)
        self._in_flight = []
        self._outbox.drop_all()
        await self._disconnect()

    stop = close  # the earlier name

    def _connected_future(self) -> asyncio.Future[None]:
        future = self._watch_future()
        self._connected_waiters.append(future)
        return future

    def _delivered_future(self) -> asyncio.Future[None]:
        future = self._watch_future()
        self._delivered_waiters.append(future)
        return future

    def _watch_future(self) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()

    @staticmethod
    def _wake(waiters: list[asyncio.Future[None]]) -> None:
        for future in waiters:
            if not future.done():
                future.set_result(None)
        waiters.clear()

    # -- the connection and the sender, in the background ---------------------------------

    async def _keep_linked(self) -> None:
        failing = False
        while self._reader is None:
            try:
                await asyncio.wait_for(self._connect_once(), CONNECT_TIMEOUT)
            except Exception as exc:  # fail-open: retried every probe_interval
                self.breaker.failure("connect")
                if not failing:
                    failing = True
                    log.warning(
                        "cannot connect to Kafka (%s); retrying every %.1fs",
                        type(exc).__name__,
                        self.probe_interval,
                    )
                await self._disconnect()
                await asyncio.sleep(self.probe_interval)
        log.info("connected to Kafka")
        self._wake(self._connected_waiters)
        await self._send_forever()

    async def _connect_once(self) -> None:
        # Idempotent with acks=all: a retried send is neither lost nor doubled, and the
        # events of a session stay in order (the app relies on it).
        producer_options = {"request_timeout_ms": PRODUCER_REQUEST_TIMEOUT_MS, **self._options}
        self._producer = AIOKafkaProducer(**producer_options, enable_idempotence=True, acks="all")
        # No group: partitions are assigned by hand, positions kept in memory.
        self._consumer = AIOKafkaConsumer(
            **self._options,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="latest",
            isolation_level="read_committed",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        await self._producer.start()
        await self._consumer.start()
        partitions = await self._producer.partitions_for(self.verdicts_topic)
        reader = VerdictReader(self._consumer, self.verdicts_topic, len(partitions), self._claim())
        try:
            await reader.start()
        except BaseException:
            with contextlib.suppress(Exception):
                await reader.stop()  # the claim's group member too
            raise
        for session_id, session in self._sessions.items():  # opened while connecting
            reader.watch(session_id, session.on_verdict)
        self._reader = reader  # from now on open_session watches by itself

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

    async def _disconnect(self) -> None:
        reader, consumer, producer = self._reader, self._consumer, self._producer
        self._reader = self._consumer = self._producer = None
        if reader is not None:
            self._retired_bad_records += reader.bad_records
            with contextlib.suppress(Exception):
                await reader.stop()
        for client in (consumer, producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.stop(), self.close_timeout + 5.0)

    async def _send_forever(self) -> None:
        """Deliver the buffer in order, one batch in flight at a time."""
        while True:
            await self._outbox.wait_ready()
            self._in_flight = self._outbox.take()
            failed, error = await self._deliver(self._in_flight)
            self._in_flight = []
            if failed:
                self._stats.publish_errors += len(failed)
                self.breaker.failure("publish")
                log.warning(
                    "%d events not delivered (%s); retrying in %.1fs",
                    len(failed),
                    type(error).__name__,
                    self.probe_interval,
                )
                self._outbox.put_back(failed)
                self._wake(self._delivered_waiters)
                await asyncio.sleep(self.probe_interval)
            else:
                self._wake(self._delivered_waiters)

    async def _deliver(self, batch: list[Outgoing]) -> tuple[list[Outgoing], BaseException | None]:
        """Send a batch; the events not acknowledged (in order) and the first error."""
        producer, reader = self._producer, self._reader
        assert producer is not None and reader is not None
        sent: list[tuple[Outgoing, asyncio.Future[Any]]] = []
        error: BaseException | None = None
        for index, event in enumerate(batch):
            if not event.stamped:  # once: a re-sent event keeps its reply partition
                event.stamped = True
                session_id = event.key.decode("utf-8")
                event.reply = reader.stamp(session_id)
                if session_id not in self._sessions:  # closed since (e.g. its session_end):
                    reader.unwatch(session_id)  # no verdict awaited, nothing stays due
            headers = None if event.reply is None else [reply_header(event.reply)]
            try:
                ack = await producer.send(
                    self.events_topic, event.record, key=event.key, headers=headers
                )
            except Exception as exc:
                error = exc
                unsent = batch[index:]
                break
            sent.append((event, ack))
        else:
            unsent = []
        results = await asyncio.gather(*(ack for _, ack in sent), return_exceptions=True)
        failed = []
        for (event, _), result in zip(sent, results, strict=True):
            if isinstance(result, BaseException):
                error = error or result
                failed.append(event)
            else:
                self._stats.published += 1
                if not event.delivered.done():
                    event.delivered.set_result(None)
        return failed + unsent, error

    @property
    def reader(self) -> VerdictReader:
        if self._reader is None:
            raise RuntimeError("the client is not connected (yet)")
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
            breaker=self.breaker,
        )
        if self._sessions.get(session_id) is not None:
            raise ValueError(f"session {session_id!r} is already open in this client")
        if self._link is None and not self._closing:
            await self.start()  # lazily, in the background
        if self._reader is not None:
            self._reader.watch(session_id, session.on_verdict)
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
        """Append to the buffer; the background sender delivers it (never blocks)."""
        delivered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._outbox.append(Outgoing(session_id.encode("utf-8"), record, delivered))
        return delivered


def _default_group(verdicts_topic: str) -> str:
    return runtime_group(verdicts_topic)
