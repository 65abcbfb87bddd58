"""Records of a topic handed over a fetched batch per partition at a time
(`LOOPWATCH_BATCH_HAND_OFF`, on by default).

faust's fetch loop (`Consumer._drain_messages`) takes the records aiokafka's `getmany`
fetched (a list per partition) and, one record at a time: goes round-robin over the
partitions in an async generator (`Consumer.getmany`), checks the flow and the consumer
generation, notes the partition's high-water mark, builds a `Message`, checks the read
offset for stale records and gaps, awaits `wait_first(callback(message), flow)`, and the
conductor's callback takes an `asyncio.Lock` to look the partition's handler up; the
inline callback (`inline`) then tracks the record, notes the inbound time, processes it
and acks it (a threading lock, two sets, a list). `BatchHandOff._drain_messages` does
per partition's fetched batch what those do per record, for the topics given to
`InlineConductor.process_in_batches`, and leaves every other topic's records (the
changelogs during recovery) to faust's per-record path, in the same loop:

* once per batch: the flow and generation check (a record of an earlier generation, or
  one fetched while the flow is stopped, is not processed: it is read again from the
  committed offset after the rebalance), the high-water mark, the inbound time for the
  stall check, tracking (one stand-in message in `_unacked_messages`, so a rebalance's
  `wait_empty` waits for the batch), one ack bookkeeping for every processed offset;
* per record, as faust does: the read offset (a record below it is dropped, a hole
  above it noted as a gap), the `Message`, and between records the flow check, so a
  rebalance that stops the flow splits the batch: the records processed so far are
  acked (their offsets may be committed), the rest are neither processed nor acked.

A record being processed is never cut short (no `wait_first` around it: a rebalance
waits for it through the tracking, as for `inline`). A record the callback holds back
(`BatchProgress.hold`: the offset guard found records missing before it) ends its batch
unacked. An exception from the callback stops the fetch loop (the worker stops) with the
records processed before it acked and that one not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from time import monotonic
from typing import Any

from faust.transport.consumer import CONSUMER_FETCHING
from mode.utils.futures import notify

YIELD_EVERY = 100
"""Records after which the loop gives the event loop a turn (faust's figure)."""


class BatchProgress:
    """What the batch callback reports: how many of the batch's leading records it
    processed (`done`; those are acked), and whether to go on (`go_on()`: false once a
    rebalance stopped the flow or changed the consumer generation)."""

    __slots__ = ("_go_on", "done")

    def __init__(self, go_on: Callable[[], bool]) -> None:
        self.done = 0
        self._go_on = go_on

    def go_on(self) -> bool:
        return self._go_on()


BatchCallback = Callable[[Any, Sequence[Any], BatchProgress], Awaitable[None]]
"""`callback(tp, messages, progress)`: process `messages` (faust `Message`s of `tp`, in
offset order) one by one, counting each processed one in `progress.done` and asking
`progress.go_on()` before each; return early to leave the rest unprocessed."""


class BatchHandOff:
    """A mixin for faust's consumer (`offset_guard.GuardedConsumer`): its fetch loop
    hands the records of the topics in `batch_callbacks` over per partition's batch."""

    app: Any
    suspend_flow: asyncio.Event
    flow_active: bool
    fetched_waiting: int
    _acked: Any
    _acked_index: Any
    _committed_offset: Any
    _unacked_messages: Any
    _waiting_for_ack: Any
    _read_offset: Any
    _n_acked: int
    handing_over = False
    """Set while fetched records are handed over: the offset guard seeks no partition
    then (`OffsetOrder.heal`; a seek would race with the read offsets set here)."""

    def batch_callbacks(self) -> dict[str, BatchCallback]:
        callbacks: dict[str, BatchCallback] = getattr(self.app.topics, "batch_callbacks", {})
        return callbacks

    async def _drain_messages(self, fetcher: Any) -> None:
        callbacks = self.batch_callbacks()
        if not callbacks:
            await super()._drain_messages(fetcher)  # type: ignore[misc]
            return
        this: Any = self
        consumer_stopped, fetcher_stopped = this._stopped.is_set, fetcher._stopped.is_set
        try:
            while not (consumer_stopped() or fetcher_stopped()):
                this.diag.set_flag(CONSUMER_FETCHING)
                records, active = await this._wait_next_records(1.0)
                await this.sleep(0)  # faust's: a turn even when records came at once
                if records is None or this.should_stop:
                    continue
                if not self.flow_active:
                    await this._seek_when_stopped()
                    continue
                await self._hand_over(records, active, callbacks)
                this.diag.unset_flag(CONSUMER_FETCHING)
        except this.consumer_stopped_errors:
            if this.transport.app.should_stop:
                this.log.info("Broker stopped consumer, shutting down...")
                return
            raise
        except asyncio.CancelledError:
            if this.transport.app.should_stop:
                this.log.info("Consumer shutting down for user cancel.")
                return
            raise
        except Exception as exc:
            this.log.exception("Drain messages raised: %r", exc)
            raise
        finally:
            this.diag.unset_flag(CONSUMER_FETCHING)

    async def _seek_when_stopped(self) -> None:
        """faust's `getmany` with the flow stopped: back to the committed offsets."""
        this: Any = self
        try:
            await this.perform_seek()
        except Exception as ex:
            this.log.warning(f"exception performing seek when flow not active {ex}")

    async def _hand_over(
        self, records: Any, active: Any, callbacks: dict[str, BatchCallback]
    ) -> None:
        """Each partition's fetched records: a batch to its topic's callback, or else one
        at a time to faust's (as faust's loop does)."""
        this: Any = self
        app = this.app
        generation = app.consumer_generation_id
        commit_every = this._commit_every
        if commit_every is not None and self._n_acked >= commit_every:
            self._n_acked = 0
            await this.commit()
        self.handing_over = True
        try:
            await self._each_partition(records, active, callbacks, generation)
        finally:
            self.handing_over = False
            self.fetched_waiting = 0

    async def _each_partition(
        self, records: Any, active: Any, callbacks: dict[str, BatchCallback], generation: int
    ) -> None:
        this: Any = self
        app = this.app
        buffered = this._buffered_partitions
        for tp, fetched in records.items():
            if not self.flow_active or app.consumer_generation_id != generation:
                break  # faust's getmany stops here too
            if active is not None and tp not in active and tp not in buffered:
                continue
            app.monitor.track_tp_end_offset(tp, this.highwater(tp))
            callback = callbacks.get(tp.topic)
            if callback is None:
                await self._one_at_a_time(tp, fetched)
            else:
                await self._batch(tp, fetched, callback, generation)

    async def _one_at_a_time(self, tp: Any, fetched: Sequence[Any]) -> None:
        """faust's per-record loop body for these records (`_drain_messages`)."""
        this: Any = self
        read_offset = self._read_offset
        acks_enabled = this.app.topics.acks_enabled_for(tp.topic)
        for count, record in enumerate(fetched, 1):
            if not self.flow_active:
                return
            if not count % YIELD_EVERY:
                await asyncio.sleep(0)
            message = this._to_message(tp, record)
            offset = message.offset
            r_offset = read_offset[tp]
            if r_offset is None or offset >= r_offset:
                if offset - (r_offset or 0) > 1 and r_offset and acks_enabled:
                    await this._add_gap(tp, r_offset + 1, offset)
                await this.wait_first(this.callback(message), self.suspend_flow.wait())
                read_offset[tp] = offset

    async def _batch(
        self, tp: Any, fetched: Sequence[Any], callback: BatchCallback, generation: int
    ) -> None:
        """One partition's batch to `callback`: read offsets and gaps per record as faust
        does, then tracked as one, processed, and the processed ones acked at once."""
        this: Any = self
        app = this.app
        read_offset = self._read_offset
        to_message = this._to_message
        r_offset = read_offset[tp]
        messages = []
        for record in fetched:
            offset = record.offset
            if r_offset is not None and offset < r_offset:
                continue  # faust drops it as already read (the offset guard re-reads)
            if r_offset and offset - r_offset > 1:
                await this._add_gap(tp, r_offset + 1, offset)
            r_offset = offset
            messages.append(to_message(tp, record))
        if not messages:
            return
        flow = self.suspend_flow
        flow_control = app.flow_control

        def go_on() -> bool:
            return (
                app.consumer_generation_id == generation
                and not flow.is_set()
                and flow_control.is_active()
            )

        progress = BatchProgress(go_on)
        if not go_on():
            return  # as faust's stream drops them: not processed, not acked
        tracked = messages[0]  # one stand-in for the batch: a rebalance waits for it
        tracked.tracked = True
        self._unacked_messages.add(tracked)
        app.monitor.stream_inbound_time[tp] = monotonic()
        try:
            await callback(tp, messages, progress)
        finally:
            done = progress.done
            if done:
                self._ack_offsets(tp, [message.offset for message in messages[:done]])
                read_offset[tp] = messages[done - 1].offset
            self._unacked_messages.discard(tracked)
            notify(self._waiting_for_ack)

    def _ack_offsets(self, tp: Any, offsets: list[int]) -> None:
        """faust's `Consumer.ack` for each of these offsets of `tp` (a topic with acks
        enabled), at once: offsets at or above the committed one, not acked yet, join
        the acked offsets that the next commit reads (`_new_offset`)."""
        committed = self._committed_offset[tp]
        acked_index = self._acked_index[tp]
        new = [
            offset
            for offset in offsets
            if (committed is None or offset >= committed) and offset not in acked_index
        ]
        acked_index.update(new)
        self._acked[tp].extend(new)
        self._n_acked += len(new)
