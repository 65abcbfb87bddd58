"""Changelog records handed to the table recovery a fetched batch per partition at a time,
straight from the consumer (`LOOPWATCH_CHANGELOG_BATCHES`, on by default).

faust's fetch loop hands each changelog record it fetched, one at a time, to the
conductor: a `Message`, a coroutine under `wait_first`, the conductor's lock, a faust
`Event`, the flow-controlled changelog queue; the recovery loop then takes it off that
queue again. With `BatchRecovery` doing the rest per batch, that path was most of what a
restored record still cost (docs/performance.md §4, "Changelog records straight from the
consumer"). `ChangelogHandOff._wait_next_records` takes the records of every table's
changelog partition out of each fetch and hands them to `BatchRecovery.read_fetched`
(`ChangelogRecord`s, no `Message` and no `Event`); the other topics' records go on to
faust's loop (or `BatchHandOff`'s) as before. What it keeps of faust's path, per
partition's batch:

* nothing is handed over while the consumer's flow is stopped or the app's flow control
  is suspended (a rebalance: faust's queue would be cleared when the flow resumes, and
  recovery seeks the partitions again), nor once the consumer generation changed while
  the fetch was handed over;
* a partition that is neither active nor buffered for the fetch is passed over (faust's
  `getmany`);
* the read offset: a record below it is dropped as already read, the partition's read
  offset is its last record's after (changelog topics have acks off: no gaps noted);
* the high-water mark for the monitor.

What recovery does with them is `BatchRecovery`'s loop body (offsets seen, tables'
hooks, buffers, the end of recovery, the standbys' ready signal), run in the fetch loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from faust.types import TP

MAX_BATCH = 2000
"""Records handed to recovery in one call (a fetch may hold more for a partition: the
event loop gets a turn between two calls)."""


class ChangelogRecord:
    """What recovery, the table's hook and faust's stores read of a changelog record (an
    `Event` and its `Message` alike: `record.message` is the record itself)."""

    __slots__ = ("key", "offset", "partition", "tp", "value")

    def __init__(self, tp: TP, offset: int, key: bytes | None, value: bytes | None) -> None:
        self.tp = tp
        self.partition = tp.partition
        self.offset = offset
        self.key = key
        self.value = value

    @property
    def message(self) -> ChangelogRecord:
        return self

    @property
    def topic(self) -> str:
        return self.tp.topic

    def __repr__(self) -> str:
        return f"ChangelogRecord({self.tp!r}, {self.offset}, {self.key!r}, {self.value!r})"


ReadFetched = Callable[[TP, list[ChangelogRecord]], Awaitable[None]]
"""`BatchRecovery.read_fetched`: a partition's records, in offset order."""


class ChangelogHandOff:
    """A mixin for faust's consumer (`offset_guard.GuardedConsumer`): each fetch's
    changelog records go to the table recovery per partition (see the module)."""

    app: Any
    transport: Any
    flow_active: bool
    suspend_flow: asyncio.Event
    _read_offset: Any
    _buffered_partitions: Any

    async def _wait_next_records(self, timeout: float) -> Any:
        records, active = await super()._wait_next_records(timeout)  # type: ignore[misc]
        if records and getattr(self.transport, "changelog_batches", False):
            read = getattr(self.app.tables.recovery, "read_fetched", None)
            if read is not None:
                records = await self._hand_changelogs_over(records, active, read)
        return records, active

    async def _hand_changelogs_over(
        self, records: dict[TP, Sequence[Any]], active: Any, read: ReadFetched
    ) -> dict[TP, Sequence[Any]]:
        """`read` each changelog partition's records; the other partitions' records."""
        app = self.app
        changelogs = app.tables.changelog_topics
        others: dict[TP, Sequence[Any]] = {}
        generation = app.consumer_generation_id
        for tp, fetched in records.items():
            if tp.topic not in changelogs:
                others[tp] = fetched
            elif self._flowing(generation) and (
                active is None or tp in active or tp in self._buffered_partitions
            ):
                app.monitor.track_tp_end_offset(tp, self.highwater(tp))  # type: ignore[attr-defined]
                await self._read_in_batches(tp, fetched, read, generation)
        return others

    def _flowing(self, generation: int) -> bool:
        app = self.app
        return (
            self.flow_active
            and not self.suspend_flow.is_set()
            and app.flow_control.is_active()
            and app.consumer_generation_id == generation
        )

    async def _read_in_batches(
        self, tp: TP, fetched: Sequence[Any], read: ReadFetched, generation: int
    ) -> None:
        read_offset = self._read_offset
        for start in range(0, len(fetched), MAX_BATCH):
            if start:
                await asyncio.sleep(0)  # a turn for the event loop between two calls
                if not self._flowing(generation):
                    return
            r_offset = read_offset[tp]
            batch = [
                ChangelogRecord(tp, record.offset, record.key, record.value)
                for record in fetched[start : start + MAX_BATCH]
                if r_offset is None or record.offset >= r_offset
            ]
            if batch:
                await read(tp, batch)
                read_offset[tp] = batch[-1].offset
