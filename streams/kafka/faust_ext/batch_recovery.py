"""faust's table recovery loop, per batch of changelog records instead of per record.

faust-streaming's `Recovery._slurp_changelogs` takes each changelog record from its queue
with `asyncio.wait_for` (a task per record), formats two debug f-strings for it, and
after it rebuilds the counters of remaining offsets twice (`need_recovery`,
`standby_remaining_total`): about half of the ~190 µs a record cost to restore
(docs/performance.md §4). `BatchRecovery` takes whatever the queue holds at once, does
the per-record part (offsets, buffers) in a plain loop, hands the batch's records to the
table in one call when the table takes batches (`on_changelog_events`), and checks
whether recovery is done once per batch. What it keeps of faust's loop: the offsets
seen per partition (a record at or below one is passed over), the buffers applied to
the store every `recovery_buffer_size`/`standby_buffer_size` records, the end of
recovery once no active partition has records left (after flushing the buffers), the
aborted-transaction check on a quiet queue, the standbys' ready signal, the samples
of its time estimate. What it changes: a record of a partition that is neither active
nor standby is passed over (faust's loop applied it to the previous record's table).

`read_fetched` does the loop's work for a partition's records handed over by the
consumer as fetched (`changelog_hand_off`: no `Event`s, no queue); the loop then waits on
an empty queue, and the end of a recovery is cleared when the next one starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from itertools import repeat
from time import monotonic
from typing import Any, cast

from faust.tables.recovery import Recovery
from faust.types import TP
from faust.utils.tracing import finish_span
from mode import Service

log = logging.getLogger(__name__)

MAX_BATCH = 2000
"""Records taken from the queue at once (the queue holds up to faust's
`stream_buffer_maxsize`; a bound keeps each turn of the event loop short)."""
QUIET_SECONDS = 5.0
"""How long the loop waits for a record before it checks whether recovery is done
(faust's figure)."""


class BatchRecovery(Recovery):
    """faust's recovery service with `_slurp_changelogs` per batch (see the module)."""

    records_read: int = 0
    """Records of active partitions read (and applied) since the process started: offsets
    overstate them once compaction has removed records, so a restore's rate is this."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # faust trims its samples one by one; a bounded deque does it
        self._processing_times = deque(maxlen=self.num_samples_required_for_estimate)

    @Service.task  # (replaces faust's task of that name)
    async def _slurp_changelogs(self) -> None:
        queue = self.tables.changelog_queue
        quiet_turns = 0
        while not self.should_stop:
            try:
                batch: list[Any] = []
                if queue.empty():
                    try:
                        batch.append(await asyncio.wait_for(queue.get(), timeout=QUIET_SECONDS))
                    except TimeoutError:
                        quiet_turns += 1
                        if self.should_stop:
                            return
                        await self._end_if_recovered(quiet_turns)
                        continue
                quiet_turns = 0
                while len(batch) < MAX_BATCH and not queue.empty():
                    batch.append(queue.get_nowait())
                await self._read_batch(batch)
                await self._after_batch()
            except Exception as exc:  # faust's loop logs and goes on the same way
                log.warning("Error in recovery %r", exc)

    async def read_fetched(self, tp: TP, records: list[Any]) -> None:
        """Records of changelog partition `tp` as the consumer fetched them, in offset
        order (`changelog_hand_off`): what the loop does with a batch from its queue."""
        if tp not in self.active_tps and tp not in self.standby_tps:
            log.warning(
                "recovery unknown topic %s offsets %s-%s", tp, records[0].offset, records[-1].offset
            )
            return
        try:
            await self._read_batch(records)
            await self._after_batch()
        except Exception as exc:  # as the loop: logged, and the fetch loop goes on
            log.warning("Error in recovery %r", exc)

    def _set_recovery_started(self) -> None:
        super()._set_recovery_started()
        # The end of the previous recovery is no news for this one (faust's loop cleared
        # it before each record it took; records read by `read_fetched` do not pass
        # through the loop, which may sit on an empty queue meanwhile).
        self.signal_recovery_end.clear()

    async def _after_batch(self) -> None:
        """After each batch: recovery ended once the active partitions are read, standbys
        signalled ready once theirs are."""
        await self._end_if_recovered(0)
        standbys_ready = self._standbys_span is None and self.tables.standbys_ready
        if not standbys_ready and not self.standby_remaining_total():
            log.debug("Completed standby partition fetch")
            if self._standbys_span:
                finish_span(self._standbys_span)
                self._standbys_span = None
            self.tables.on_standbys_ready()

    async def _read_batch(self, batch: Sequence[Any]) -> None:
        """Note each new record's offset, hand them to their tables, buffer them for the
        store (applied when a buffer is full)."""
        now = monotonic()
        active_tps, standby_tps = self.active_tps, self.standby_tps
        tp_to_table, buffer_sizes = self.tp_to_table, self.buffer_sizes
        active_offsets, standby_offsets = self.active_offsets, self.standby_offsets
        read: dict[Any, list[Any]] = {}  # table -> its new records, in order
        actives = 0
        for event in batch:
            message = event.message
            tp: TP = message.tp
            if tp in active_tps:
                offsets = active_offsets
                self._active_events_received_at[tp] = now
            elif tp in standby_tps:
                offsets = standby_offsets
                self._standby_events_received_at.setdefault(tp, now)
            else:
                log.warning("recovery unknown topic %s offset %s", tp, message.offset)
                continue
            seen = offsets.get(tp)
            if seen is None or message.offset > seen:
                offsets[tp] = message.offset
                actives += offsets is active_offsets
                table = tp_to_table[tp]
                if tp not in buffer_sizes:
                    buffer_sizes[tp] = (
                        table.recovery_buffer_size
                        if offsets is active_offsets
                        else table.standby_buffer_size
                    )
                read.setdefault(table, []).append(event)
        for table, events in read.items():
            await _on_changelog_events(table)(events)
            self._buffer(table, events, now)
        if actives:
            self.records_read += actives
            self._sample(actives)

    def _buffer(self, table: Any, events: list[Any], now: float) -> None:
        buffer = self.buffers[table]
        buffer_sizes = self.buffer_sizes
        for event in events:
            buffer.append(event)
            if len(buffer) >= buffer_sizes[event.message.tp]:
                table.apply_changelog_batch(buffer)
                buffer.clear()
                self._last_flush_at = now

    def _sample(self, count: int) -> None:
        """The time per active record since the last batch, `count` samples of it (the
        samples of faust's estimate of the time left)."""
        now = monotonic()
        last = self._last_active_event_processed_at
        if last is not None:
            self._processing_times.extend(repeat((now - last) / count, count))
        self._last_active_event_processed_at = now

    async def _end_if_recovered(self, quiet_turns: int) -> None:
        """faust's `_maybe_signal_recovery_end`: recovery ends once no active partition
        has records left (the buffers applied first)."""
        if quiet_turns > 1 and self.app.in_transaction:
            await self._skip_aborted_transactions()
        if self.in_recovery and not self._active_left():
            self.flush_buffers()
            self._set_recovery_ended()
            if self._actives_span is not None:
                self._actives_span.set_tag("Actives-Ready", True)
            self.signal_recovery_end.set()

    def _active_left(self) -> bool:
        """`need_recovery()` without building a Counter."""
        offsets = self.active_offsets
        for tp, highwater in self.active_highwaters.items():
            offset = offsets[tp]
            if highwater is not None and offset is not None and highwater - offset > 0:
                return True
        return False

    async def _skip_aborted_transactions(self) -> None:
        """faust's `detect_aborted_tx`: a partition whose consumer position reached its
        high-water mark while its offset did not (an aborted transaction's records are
        never delivered) counts as read up to it."""
        offsets = self.active_offsets
        position = cast(Callable[[TP], Awaitable[int | None]], self.app.consumer.position)
        for tp, highwater in self.active_highwaters.items():
            if highwater is not None and offsets[tp] is not None and offsets[tp] < highwater:
                at = await position(tp)
                if at is not None and at >= highwater:
                    log.info("Aborted tx until highwater for %s", tp)
                    offsets[tp] = highwater


def _on_changelog_events(table: Any) -> Callable[[list[Any]], Awaitable[None]]:
    """The table's call for a batch of its changelog records: its own
    `on_changelog_events` (`SessionTable`), else faust's per record."""
    batch_call = getattr(table, "on_changelog_events", None)
    if batch_call is not None:
        return cast(Callable[[list[Any]], Awaitable[None]], batch_call)

    async def each(events: list[Any]) -> None:
        for event in events:
            await table.on_changelog_event(event)

    return each
