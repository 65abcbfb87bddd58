"""One conversation as the runtime sees it: publish its events, wait for its verdicts."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loopwatch.models import LoopVerdict
from loopwatch.streams.client.breaker import CircuitBreaker
from loopwatch.streams.client.encoding import Call, EventEncoder
from loopwatch.streams.client.ledger import Ledger, PlacedWarning, warnings_by_message
from loopwatch.streams.client.stats import ClientStats
from loopwatch.streams.client.timeline import Arrival, PendingEvent, VerdictTimeline

log = logging.getLogger(__name__)

Publish = Callable[[str, bytes], Awaitable["asyncio.Future[Any] | None"]]
"""Hands a record to the producer; returns its delivery future (None: not published)."""


@dataclass(frozen=True)
class VerdictWait:
    """The outcome of waiting for a session's verdicts."""

    through_seq: int | None
    """The seq waited for (None: the session had published nothing)."""
    complete: bool
    """True when the verdict of `through_seq` had arrived; False after a timeout."""
    waited_seconds: float
    """How long the wait took."""
    warnings: tuple[PlacedWarning, ...]
    """Every warning of the session received so far, anchored to history messages."""
    timeline: VerdictTimeline | None = None
    """Where the time went for the event waited for (None when its verdict had not
    arrived, or arrived before this wait began with its timing already handed out)."""
    skipped: bool = False
    """True when the wait returned at once because the client's circuit was open."""


class Session:
    """Assigns `seq`, publishes events keyed by the session id, collects verdicts.

    `message_index` (optional on every publish) is the index of the message in the
    runtime's own history that the event comes from; it is what lets
    `warnings_by_message()` feed `streams.client.placement`.
    """

    def __init__(
        self,
        *,
        session_id: str,
        encoder: EventEncoder,
        publish: Publish,
        on_close: Callable[[Session], None],
        stats: ClientStats,
        clock: Callable[[], datetime],
        default_timeout: float,
        first_seq: int = 0,
        log_timeouts: bool = True,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.session_id = session_id
        self._encoder = encoder
        self._publish = publish
        self._on_close = on_close
        self._stats = stats
        self._clock = clock
        self._default_timeout = default_timeout
        self._log_timeouts = log_timeouts
        self._breaker = breaker or CircuitBreaker()
        self._next_seq = first_seq
        self._ledger = Ledger()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._pending: dict[int, PendingEvent] = {}  # seq -> publish times, until answered
        self._arrival: Arrival | None = None
        self.closed = False

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if not self.closed:
            await self.end()

    # -- publishing ----------------------------------------------------------------------

    async def user(self, text: str | None = None, *, message_index: int | None = None) -> int:
        return await self._emit(message_index, lambda seq, ts: self._encoder.user(seq, ts, text))

    async def system(self, text: str | None = None, *, message_index: int | None = None) -> int:
        encoder = self._encoder
        return await self._emit(message_index, lambda seq, ts: encoder.system(seq, ts, text))

    async def assistant(
        self,
        text: str | None = None,
        tool_calls: Sequence[Call] = (),
        *,
        message_index: int | None = None,
    ) -> int:
        encoder = self._encoder
        return await self._emit(
            message_index, lambda seq, ts: encoder.assistant(seq, ts, text, tool_calls)
        )

    async def tool_result(
        self,
        call_id: str,
        tool_name: str,
        result: Any = None,
        error: str | None = None,
        *,
        message_index: int | None = None,
    ) -> int:
        encoder = self._encoder
        return await self._emit(
            message_index,
            lambda seq, ts: encoder.tool_result(
                seq, ts, call_id=call_id, tool_name=tool_name, result=result, error=error
            ),
        )

    async def condensed(self) -> int:
        """Publish `context_condensed` (contract 1.3): this runtime just condensed the
        session's history to fit the context (the summary itself is not sent). Needs
        1.3 workers: a 1.2 worker dead-letters it."""
        return await self._emit(None, self._encoder.condensed)

    async def end(self) -> int:
        """Publish `session_end` and stop reading this session's verdicts."""
        seq = await self._emit(None, self._encoder.end)
        self.close()
        return seq

    def close(self) -> None:
        """Stop reading verdicts without ending the session (another process may go on)."""
        if not self.closed:
            self.closed = True
            self._on_close(self)
            for _, waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def _emit(
        self, message_index: int | None, encode: Callable[[int, datetime], bytes]
    ) -> int:
        """Encode the next event and publish it. An event that cannot be encoded (NaN, a
        cycle, ...) is skipped, logged and counted as dropped, and takes no seq (the seq
        returned is the one the next event gets): a bad record never raises into the turn."""
        if self.closed:
            raise RuntimeError(f"session {self.session_id!r} is closed")
        seq = self._next_seq
        try:
            record = encode(seq, self._clock())
        except Exception as exc:  # fail-open: detection skips what it cannot encode
            self._stats.dropped += 1
            log.warning(
                "session %s: an event could not be encoded (%s); skipped",
                self.session_id,
                type(exc).__name__,
            )
            return seq
        self._next_seq += 1
        self._ledger.published(seq, message_index)
        return await self._send(seq, record)

    async def _send(self, seq: int, record: bytes) -> int:
        pending = self._pending[seq] = PendingEvent()
        delivery = await self._publish(self.session_id, record)
        if delivery is not None:
            delivery.add_done_callback(lambda _: pending.acked())
        return seq

    # -- verdicts ------------------------------------------------------------------------

    @property
    def agent_id(self) -> str | None:
        """The agent id its events carry."""
        return self._encoder.agent_id

    @property
    def last_seq(self) -> int | None:
        """The seq of the newest published event."""
        return self._ledger.last_seq

    def on_verdict(self, verdict: LoopVerdict, produced_at: float | None = None) -> None:
        """Called by the reader for each verdict of this session (`produced_at`: the
        verdict record's timestamp, seconds since the epoch)."""
        received_at = time.time()
        self._breaker.verdict_arrived()
        if not self._ledger.received(verdict):
            return
        pending = self._pending.pop(verdict.seq, None)
        for seq in [seq for seq in self._pending if seq < verdict.seq]:
            del self._pending[seq]  # answered by this verdict's arrival order
        self._arrival = Arrival(
            verdict.seq, pending, verdict.evaluated_at.timestamp(), produced_at, received_at
        )
        if verdict.warning is not None:
            self._stats.warnings[verdict.warning.rule] += 1
        still_waiting = []
        for through_seq, waiter in self._waiters:
            if self._ledger.has_verdict(through_seq):
                if not waiter.done():
                    waiter.set_result(None)
            else:
                still_waiting.append((through_seq, waiter))
        self._waiters = still_waiting

    async def verdicts(
        self, through_seq: int | None = None, timeout: float | None = None
    ) -> VerdictWait:
        """Wait until the verdict of `through_seq` (default: the newest event) has arrived,
        at most `timeout` seconds (default: the client's); then return what has arrived.

        Fail-open: a timeout is logged and counted, never raised. While the client's
        circuit is open it does not wait at all (`skipped`); a timeout counts as a
        failure of the circuit breaker, a verdict that was there resets its count.
        """
        target = self._ledger.last_seq if through_seq is None else through_seq
        timeout = self._default_timeout if timeout is None else timeout
        started = time.monotonic()
        complete = target is None or self._ledger.has_verdict(target)
        if not complete and self._breaker.is_open:
            self._stats.record_skipped(time.monotonic() - started)
            return VerdictWait(
                target,
                False,
                time.monotonic() - started,
                tuple(self._ledger.hand_out()),
                skipped=True,
            )
        if not complete and target is not None and not self.closed:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((target, waiter))
            try:
                await asyncio.wait_for(asyncio.shield(waiter), timeout)
            except TimeoutError:
                self._waiters = [(s, w) for s, w in self._waiters if w is not waiter]
            complete = self._ledger.has_verdict(target)
        waited = time.monotonic() - started
        timeline = None
        arrival = self._arrival
        if complete and arrival is not None and arrival.seq == target:
            timeline = arrival.timeline(time.time())
        self._stats.record_wait(waited, complete)
        if target is not None and not self.closed:
            if complete:
                self._breaker.wait_succeeded()
            else:
                self._breaker.failure("timeout")
        if not complete and self._log_timeouts:
            log.warning(
                "no verdict for session %s seq %s within %.2fs; going on without it",
                self.session_id,
                target,
                timeout,
            )
        return VerdictWait(target, complete, waited, tuple(self._ledger.hand_out()), timeline)

    def warnings_by_message(self) -> dict[int, list[str]]:
        """Received warnings keyed by history message index, for `placement` (hands out
        the warnings received since the last wait, as `verdicts()` does)."""
        return warnings_by_message(self._ledger.hand_out())
