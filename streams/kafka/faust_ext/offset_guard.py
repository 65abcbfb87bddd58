"""Process every event, in offset order: never skip one, never commit past one.

Two faust-streaming 0.15.3 defects together lost a verdict about one restart in three
here (`tests/integration/test_worker_lifecycle.py`):

* During recovery faust fetches the stream partitions before it seeks them to their
  committed offsets (faust #216). Records of that early fetch are still handed out after
  the seek and move the consumer's read offset past records the seek should deliver
  again; `Consumer._drain_messages` then drops those as already read.
* `Consumer._new_offset` accepts a gap of one offset at the head of the acked offsets
  (`min(acked) - committed > 1`, faust #318), so the next commit passes over the dropped
  event.

A dropped event cannot simply be processed later: a newer event of its session would
already have moved the session's `seq` past it. So `OffsetOrder` (`offset_order.py`)
checks each event before it is processed and has dropped records read again;
`GuardedConsumer` never commits past an offset that was not acked.
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from typing import Any

from faust.transport.drivers import aiokafka as aiokafka_driver
from mode import Service
from mode.services import WaitResults

from loopwatch.streams.kafka.faust_ext.batch_hand_off import BatchHandOff
from loopwatch.streams.kafka.faust_ext.changelog_hand_off import ChangelogHandOff
from loopwatch.streams.kafka.faust_ext.loop_consumer import SameLoopConsumerThread
from loopwatch.streams.kafka.faust_ext.resume_wake import WakeOnResume

log = logging.getLogger(__name__)


def missing_head(consumer: Any, tp: Any) -> int | None:
    """The committed offset of `tp` when later offsets were acked but it was not."""
    acked = consumer._acked.get(tp)
    committed = consumer._committed_offset.get(tp)
    if not acked or committed is None or min(acked) <= committed:
        return None
    gap = consumer._gap.get(tp)
    if gap is not None and gap.overlaps(committed):
        return None  # a known hole (compaction, transaction marker): faust fills it in
    return int(committed)


class FlowEvent(asyncio.Event):
    """An asyncio.Event that also hands out a future done once it is set, so a waiter
    can watch it without a task of its own (`InlineHandOff`)."""

    def __init__(self) -> None:
        super().__init__()
        self._when_set: asyncio.Future[bool] | None = None

    def set(self) -> None:
        super().set()
        if self._when_set is not None and not self._when_set.done():
            self._when_set.set_result(True)

    def when_set(self) -> asyncio.Future[bool]:
        future = self._when_set
        if future is None or (future.done() and not self.is_set()):
            future = self._when_set = asyncio.get_running_loop().create_future()
            if self.is_set():
                future.set_result(True)
        return future


class InlineHandOff(Service):
    """mode's `wait_first`, made cheap for the hand-off of each fetched record.

    faust's fetch loop runs `wait_first(callback(message), suspend_flow.wait())` per
    record, so a rebalance can interrupt a hand-off that waits on a full stream buffer.
    mode's version makes four tasks per call, waits on them and cancels three: about a
    third of faust's per-record cost here. Instead the hand-off runs inline first; one
    that has to wait (the stream buffer is full: every record, under a backlog) goes on
    in one task, watched together with the flow's `FlowEvent` future. The service
    stopping cancels the fetch loop itself, so it needs no watching here.
    """

    suspend_flow: asyncio.Event
    inline_busy = False
    """Set while a record is processed inline (`streams.kafka.faust_ext.inline`)."""

    async def wait_first(self, *coros: Any, timeout: Any = None) -> Any:
        if not self._is_record_hand_off(coros):
            return await super().wait_first(*coros, timeout=timeout)
        hand_off, suspended = coros
        suspended.close()  # never awaited: the FlowEvent's future stands in for it
        try:
            awaiting = hand_off.send(None)
        except StopIteration as done:
            return WaitResults([hand_off], [done.value], False)
        if self.inline_busy:
            # A record processed inline (`streams.kafka.faust_ext.inline`) waits for room for
            # its outputs: finish it even if the flow stops meanwhile, so that an event
            # is never left with part of its records sent (the rebalance waits for it:
            # it is tracked until acked).
            return WaitResults([hand_off], [await _resume(hand_off, awaiting)], False)
        flow = self.suspend_flow
        assert isinstance(flow, FlowEvent)
        resumed: asyncio.Future[Any] = asyncio.ensure_future(_Resumed(hand_off, awaiting))
        try:
            await asyncio.wait((resumed, flow.when_set()), return_when=asyncio.FIRST_COMPLETED)
        finally:
            interrupted = not resumed.done()
            if interrupted:
                resumed.cancel()  # the flow was suspended (or this task is cancelled)
        if interrupted:
            return WaitResults([suspended], [True], False)
        return WaitResults([hand_off], [resumed.result()], False)

    def _is_record_hand_off(self, coros: tuple[Any, ...]) -> bool:
        return (
            len(coros) == 2
            and asyncio.iscoroutine(coros[0])
            and getattr(coros[1], "cr_code", None) is _EVENT_WAIT_CODE
            and isinstance(self.suspend_flow, FlowEvent)
            and not self.suspend_flow.is_set()
            and not self._stopped.is_set()
            and not self._crashed.is_set()
        )


class GuardedConsumer(
    ChangelogHandOff, BatchHandOff, InlineHandOff, WakeOnResume, aiokafka_driver.Consumer
):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.suspend_flow = FlowEvent()
        # Records of the latest fetch not yet handed over (`inline_callback` counts them
        # down): whether more input is ready now, for the outputs' linger.
        self.fetched_waiting = 0
        # Stream partitions without a committed offset above 0: where their processing
        # starts (set at each seek to the committed offsets; `OffsetOrder.heal` reads it).
        self.stream_starts: dict[Any, int] = {}
        self._before_commit: Callable[[], Awaitable[None]] | None = getattr(
            self.transport, "before_commit", None
        )

    def _new_consumer_thread(self) -> SameLoopConsumerThread:
        return SameLoopConsumerThread(
            self,
            loop=self.loop,
            beacon=self.beacon,
            fetch_wait_ms=getattr(self.transport, "fetch_wait_ms", 0),
        )

    def _new_offset(self, tp: Any) -> int | None:
        if missing_head(self, tp) is not None:
            return None  # commit nothing for tp until its committed offset is processed
        offset: int | None = super()._new_offset(tp)
        return offset

    async def _wait_next_records(self, timeout: float) -> Any:
        records, active = await super()._wait_next_records(timeout)
        self.fetched_waiting = sum(map(len, records.values())) if records else 0
        return records, active

    async def seek_to_committed(self) -> Mapping[Any, int]:
        committed: Mapping[Any, int] = await super().seek_to_committed()
        await self._seek_uncommitted(committed)
        return committed

    async def _seek_uncommitted(self, committed: Mapping[Any, int | None]) -> None:
        """Seek the stream partitions that aiokafka's `seek_to_committed` leaves alone.

        It moves only partitions whose committed offset is above 0. A stream partition
        with none (never committed: a worker killed before its first commit) or 0 keeps
        the position that recovery's early fetch (faust #216) moved past records faust then
        dropped as not yet active, and nothing re-reads them: a restarted worker went
        silent on that partition. Such a partition starts where the group would start it:
        offset 0, or with no committed offset the log start (`auto_offset_reset`
        earliest; with latest it is left as it is)."""
        acking = self.app.topics.acks_enabled_for
        starts: dict[Any, int] = {}
        unknown: list[Any] = []
        for tp, offset in committed.items():
            if not acking(tp.topic) or (offset is not None and offset > 0):
                continue
            if offset is None:
                unknown.append(tp)
            else:
                starts[tp] = 0
        if unknown and self.app.conf.consumer_auto_offset_reset == "earliest":
            starts.update(await self.earliest_offsets(*unknown))
        self.stream_starts = starts
        for tp, offset in starts.items():
            await self._seek(tp, offset)

    async def _commit_offsets(self, offsets: Any, start_new_transaction: bool = True) -> bool:
        # The records of the events before these offsets (verdicts, changelog) must be
        # stored first; faust flushes only its own producer (see streams.kafka.outputs).
        if self._before_commit is not None:
            await self._before_commit()
        committed: bool = await super()._commit_offsets(
            offsets, start_new_transaction=start_new_transaction
        )
        return committed


_EVENT_WAIT_CODE = asyncio.Event.wait.__code__


class _Resumed:
    """An awaitable that goes on with a coroutine stepped once by hand (see `_resume`)."""

    def __init__(self, coro: Coroutine[Any, Any, Any], awaiting: Any) -> None:
        self._coro = coro
        self._awaiting = awaiting

    def __await__(self) -> Generator[Any, Any, Any]:
        return _resume(self._coro, self._awaiting)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], awaiting: Any) -> Generator[Any, Any, Any]:
    """Go on running `coro`, which was stepped once by hand and is waiting on `awaiting`
    (what it yielded), as the Task running this will: hand `awaiting` up, then resume
    `coro`; an exception thrown in (cancellation) is passed on to it."""
    try:
        yield awaiting
    except BaseException as exc:
        try:
            awaiting = coro.throw(exc)
        except StopIteration as done:
            return done.value
        return (yield from _resume(coro, awaiting))
    return (yield from coro)  # a native coroutine, resumed


class GuardedTransport(aiokafka_driver.Transport):
    """faust's aiokafka transport with `GuardedConsumer`; `before_commit` is awaited
    before each offset commit (`streams.kafka.faust_ext.guard_commits`); `fetch_wait_ms`: the
    consumer's adaptive fetch wait (`streams.kafka.faust_ext.fetch_wait`, 0: none);
    `changelog_batches`: changelog records handed to recovery per fetched batch
    (`streams.kafka.faust_ext.changelog_hand_off`)."""

    Consumer = GuardedConsumer

    def __init__(
        self,
        *args: Any,
        before_commit: Callable[[], Awaitable[None]] | None = None,
        fetch_wait_ms: int = 0,
        changelog_batches: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.before_commit = before_commit
        self.fetch_wait_ms = fetch_wait_ms
        self.changelog_batches = changelog_batches
