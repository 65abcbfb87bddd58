"""The client's link to Kafka, in the background: connecting (retried every
`probe_interval`), the verdict reader, and the one sender that delivers the outbox in
order, one batch in flight at a time. Every failure is counted by the circuit breaker
and retried; nothing here raises into the agent (docs/client.md, "Fail-open and the
circuit breaker")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaClient, AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import ClusterAuthorizationFailedError

from loopwatch.models import reply_header
from loopwatch.streams.cancelling import raise_if_cancelling
from loopwatch.streams.client.breaker import CircuitBreaker
from loopwatch.streams.client.claim import PartitionClaim
from loopwatch.streams.client.outbox import Outbox, Outgoing
from loopwatch.streams.client.reader import FETCH_MAX_WAIT_MS, VerdictReader
from loopwatch.streams.client.refusals import (
    AiokafkaQuiet,
    MissingRight,
    describe_failure,
    explain,
    missing_rights_message,
)
from loopwatch.streams.client.stats import ClientStats
from loopwatch.streams.kafka.authorized import missing_topic_rights

if TYPE_CHECKING:
    from loopwatch.streams.client.session import Session

CONNECT_TIMEOUT = 15.0
"""The longest one connection attempt may take (it is a failure then, and retried)."""
PRODUCER_REQUEST_TIMEOUT_MS = 5000
"""How long the producer tries one delivery before giving up (then the breaker counts a
failure and the batch is retried after `probe_interval`); aiokafka's default is 40 s."""

log = logging.getLogger(__name__)


def wake(waiters: list[asyncio.Future[None]]) -> None:
    """Resolve and forget every waiter."""
    for future in waiters:
        if not future.done():
            future.set_result(None)
    waiters.clear()


class KafkaLink:
    """The producer, the consumer and the verdict reader of one client, and its sender."""

    def __init__(
        self,
        *,
        options: Mapping[str, Any],
        events_topic: str,
        verdicts_topic: str,
        runtime_group: str | None,
        breaker: CircuitBreaker,
        outbox: Outbox,
        stats: ClientStats,
        sessions: Mapping[str, Session],
        probe_interval: float,
        close_timeout: float,
    ) -> None:
        """`runtime_group`: the consumer group whose partitions this process claims for
        its verdicts (None: read every partition, no reply-partition header)."""
        self._options = options
        self._events_topic = events_topic
        self._verdicts_topic = verdicts_topic
        self._runtime_group = runtime_group
        self._breaker = breaker
        self._outbox = outbox
        self._stats = stats
        self._sessions = sessions
        self._probe_interval = probe_interval
        self._close_timeout = close_timeout
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self.reader: VerdictReader | None = None
        """Set once connected (sessions opened from then on are watched by it)."""
        self.retired_bad_records = 0
        """Undecodable verdict records skipped by the readers of earlier connections."""
        self.in_flight: list[Outgoing] = []
        """The batch being delivered."""
        self.connected_waiters: list[asyncio.Future[None]] = []
        self.delivered_waiters: list[asyncio.Future[None]] = []

    async def run(self) -> None:
        """Connect (retrying), then deliver the outbox until cancelled."""
        said: str | None = None
        # aiokafka would log its error at every retry: one line of ours says it
        quiet = AiokafkaQuiet.installed()
        quiet.hold()
        try:
            while self.reader is None:
                try:
                    await asyncio.wait_for(self._connect_once(), CONNECT_TIMEOUT)
                except Exception as exc:  # fail-open: retried every probe_interval
                    raise_if_cancelling()  # closed as the attempt failed: stop, not retry
                    self._breaker.failure("connect")
                    cause = describe_failure(exc)
                    if cause != said:  # once per cause, not per retry
                        said = cause
                        reason = await explain(exc, self._options)
                        log.warning(
                            "cannot connect to Kafka: %s; retrying every %.1fs (fail-open: "
                            "the agent goes on without warnings)",
                            reason,
                            self._probe_interval,
                        )
                    await self.disconnect()
                    await asyncio.sleep(self._probe_interval)
        finally:
            quiet.release()
        log.info("connected to Kafka")
        wake(self.connected_waiters)
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
        try:
            await self._producer.start()
        except ClusterAuthorizationFailedError:
            # idempotence asks for WRITE on some topic: a principal with no rights at all
            # fails here, and the rights it lacks are the clearer cause
            await self._raise_if_rights_missing(self._producer.client)
            raise
        # a missing ACL: one clear cause now, not a wait on metadata that never comes
        await self._raise_if_rights_missing(self._producer.client)
        await self._consumer.start()
        partitions = await self._producer.partitions_for(self._verdicts_topic)
        reader = VerdictReader(self._consumer, self._verdicts_topic, len(partitions), self._claim())
        try:
            await reader.start()
        except BaseException:
            with contextlib.suppress(Exception):
                await reader.stop()  # the claim's group member too
            raise
        for session_id, session in self._sessions.items():  # opened while connecting
            reader.watch(session_id, session.on_verdict)
        self.reader = reader  # from now on open_session watches by itself

    async def _raise_if_rights_missing(self, client: AIOKafkaClient) -> None:
        missing = await missing_topic_rights(
            client, [(self._events_topic, ("WRITE",)), (self._verdicts_topic, ("READ",))]
        )
        if missing:
            raise MissingRight(missing_rights_message(missing))

    def _claim(self) -> PartitionClaim | None:
        if self._runtime_group is None:
            return None
        member = AIOKafkaConsumer(
            **self._options,
            group_id=self._runtime_group,
            enable_auto_commit=False,
            auto_offset_reset="latest",
        )
        return PartitionClaim(member, self._verdicts_topic)

    async def disconnect(self) -> None:
        """Stop the reader, the consumer and the producer (each bounded; never raises)."""
        reader, consumer, producer = self.reader, self._consumer, self._producer
        self.reader = self._consumer = self._producer = None
        if reader is not None:
            self.retired_bad_records += reader.bad_records
            with contextlib.suppress(Exception):
                await reader.stop()
        for client in (consumer, producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.stop(), self._close_timeout + 5.0)

    async def _send_forever(self) -> None:
        """Deliver the buffer in order, one batch in flight at a time."""
        while True:
            raise_if_cancelling()  # a failed delivery may have swallowed close()'s cancel
            await self._outbox.wait_ready()
            self.in_flight = self._outbox.take()
            failed, error = await self._deliver(self.in_flight)
            self.in_flight = []
            if failed:
                self._stats.publish_errors += len(failed)
                self._breaker.failure("publish")
                log.warning(
                    "%d events not delivered (%s); retrying in %.1fs",
                    len(failed),
                    type(error).__name__,
                    self._probe_interval,
                )
                self._outbox.put_back(failed)
                wake(self.delivered_waiters)
                await asyncio.sleep(self._probe_interval)
            else:
                wake(self.delivered_waiters)

    async def _deliver(self, batch: list[Outgoing]) -> tuple[list[Outgoing], BaseException | None]:
        """Send a batch; the events not acknowledged (in order) and the first error."""
        producer, reader = self._producer, self.reader
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
                    self._events_topic, event.record, key=event.key, headers=headers
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
