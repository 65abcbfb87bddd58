"""`BatchedOutputs`: the worker's records (verdicts, warnings, dead letters, the table's
changelog) sent as one aiokafka batch per partition.

faust produces one record at a time (`Topic.send`: a FutureMessage, the producer buffer,
sensors, one aiokafka `send` with its own future), and every event produces two or three:
that per-record cost capped the worker (figures: README, "The stream worker").

`BatchedOutputs` collects records per partition and hands each partition's records to
aiokafka as one closed batch (`send_batch`). When they go (the adaptive linger):

* nothing in flight and no more input ready: at the end of the current event-loop turn
  (the records of one event go together), so a lone verdict waits for no timer;
* batches outstanding: when the last of them is acknowledged, or after `LINGER_SECONDS`
  at most, so under load a batch grows for one broker round trip by itself;
* more input ready (`input_waiting()`: the agent's stream has fetched records queued, a
  backlog): after `LINGER_SECONDS`, or at once when the input runs out first; an
  acknowledgement does not start a drain then;
* `BATCH_RECORDS` waiting: at once; records added while a drain is under way go with it.

Why adaptive, rather than a fixed linger or a drain at every acknowledgement: both were
wrong at one end of the load or the other (docs/performance.md, "Hot-path choices").

* Order: one drain at a time, each partition's batches submitted in the order their
  records were added, and aiokafka keeps one batch per partition in flight, so records
  land in the order added (the changelog depends on it: the last write of a key wins).
* Delivery: a record's `on_delivered(offset)` runs once the broker acknowledged it.
  `flush()` sends what waits and returns when every record added before the call is
  acknowledged; the consumer calls it before each offset commit
  (`streams.kafka.faust_ext.offset_guard`), so an offset is committed only after the records
  of the events before it are stored. Records added during the flush (events processed
  meanwhile, whose offsets this commit does not cover) are not waited for: under load
  the flush used to chase them and a commit took seconds.
* Failure: a batch aiokafka gives up on fails `flush()` (no commit) and calls
  `on_failure`, which crashes the worker; the next one processes the uncommitted events
  again (the table keeps unacknowledged verdicts for that, see `session_record`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopwatch.streams.kafka.faust_ext.producer import (
    default_partition,
    default_partition_count,
    wait_on_metadata,
)
from loopwatch.streams.kafka.key_partition import key_partition
from loopwatch.streams.kafka.outputs import Headers, OnDelivered, OutputFailed

log = logging.getLogger(__name__)

LINGER_SECONDS = 0.010
"""The longest a record waits for outstanding batches before its own is sent (the
worker's `LOOPWATCH_OUTPUT_LINGER_MS`); with nothing in flight records go at once."""
BATCH_RECORDS = 2000
"""Records waiting that trigger a send at once, without the linger."""
MAX_WAITING_RECORDS = 20000
"""Beyond this many records not yet handed to aiokafka, `send` waits (back-pressure)."""
MAX_CACHED_PARTITIONS = 100_000


@dataclass(slots=True)
class _Record:
    key: bytes | None
    value: bytes | None
    headers: Headers | None
    on_delivered: OnDelivered | None


class BatchedOutputs:
    """Records collected per partition, sent as one aiokafka batch per partition.

    `producer()` returns the started `AIOKafkaProducer` (faust's, created when the worker
    starts). `on_delivered_batch(topic, partition, last_offset)` runs per acknowledged
    batch (the table records its persisted changelog offset there).
    """

    def __init__(
        self,
        producer: Callable[[], Any],
        *,
        on_failure: Callable[[BaseException], None],
        on_delivered_batch: Callable[[str, int, int], None] | None = None,
        linger: float = LINGER_SECONDS,
        batch_records: int = BATCH_RECORDS,
        max_waiting: int = MAX_WAITING_RECORDS,
        send_when_idle: bool = True,
        input_waiting: Callable[[], bool] = bool,
    ) -> None:
        """`send_when_idle` False: always linger (a fixed linger, as before the adaptive
        one; tests use it to control when drains happen). `input_waiting()`: whether more
        input is ready to be processed now (default: never; `input_waiting` may be set
        later, once the stream exists)."""
        self._producer = producer
        self._on_failure = on_failure
        self._on_delivered_batch = on_delivered_batch
        self._linger = linger
        self._batch_records = batch_records
        self._max_waiting = max_waiting
        self._send_when_idle = send_when_idle
        self.input_waiting = input_waiting
        # (topic, partition or None for "by key") -> records in the order added
        self._waiting: dict[tuple[str, int | None], list[_Record]] = {}
        self._waiting_count = 0
        # the end of this loop turn (`call_soon`) or the linger (`call_later`)
        self._timer: asyncio.Handle | None = None
        # whether `_timer` is the linger: kept apart because a loop's handles need not be
        # asyncio's classes (uvloop's `call_later` returns no `asyncio.TimerHandle`)
        self._lingering = False
        self._drain_lock = asyncio.Lock()
        self._drains: set[asyncio.Task[None]] = set()
        # batch future -> the number of the first record of the drain round it is in
        self._unacked: dict[asyncio.Future[Any], int] = {}
        # Records are numbered as added; every record numbered below `_submitted` has
        # been handed to aiokafka (a drain round takes all waiting ones at once).
        self._added = 0
        self._submitted = 0
        self._round_start = 0
        self._submit_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._failure: BaseException | None = None
        self._partition_of: dict[tuple[str, bytes], int] = {}
        self._partition_counts: dict[str, int | None] = {}
        """Each topic's partition count when `_partition_of` was filled for it."""

    @property
    def waiting(self) -> int:
        """Records not yet handed to aiokafka."""
        return self._waiting_count

    @property
    def failed(self) -> bool:
        """A batch could not be delivered (the worker is stopping): `/ready` says so."""
        return self._failure is not None

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
        # An explicit partition (a verdict's reply partition) is batched with the other
        # records for that partition, in the order added, like the changelog's.
        self._add(topic, partition, _Record(key, value, headers, on_delivered))
        if self._waiting_count >= self._max_waiting:
            await self._drain()

    def add_changelog(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        self._add(topic, partition, _Record(key, value, None, None))

    async def flush(self) -> None:
        """Send what waits; return once every record added before this call is
        acknowledged (raise `OutputFailed` if one was not)."""
        mark = self._added
        if self._submitted < mark and self._failure is None:
            if not self._drain_lock.locked():
                self._start_drain()
            # else the drain under way takes them before it ends
            submitted = asyncio.get_running_loop().create_future()
            self._submit_waiters.append((mark, submitted))
            # shielded: a cancelled flush must leave the drain and the waiter list intact
            await asyncio.shield(submitted)
        # Batches of later drain rounds hold only records added after this call.
        earlier = [future for future, first in self._unacked.items() if first < mark]
        if earlier:
            await asyncio.wait(earlier)
        if self._failure is not None:
            raise OutputFailed(f"a batch was not delivered: {self._failure!r}")

    def _add(self, topic: str, partition: int | None, record: _Record) -> None:
        self._waiting.setdefault((topic, partition), []).append(record)
        self._waiting_count += 1
        self._added += 1
        if self._drain_lock.locked():
            return  # the drain under way takes these too before it ends
        if self._waiting_count >= self._batch_records:
            self._start_drain()
        elif self._timer is None or self._lingering:
            idle = self._send_when_idle and not self._unacked and not self.input_waiting()
            if idle:  # at the end of this turn (also when a backlog just ran out)
                self._cancel_timer()
                self._timer = asyncio.get_running_loop().call_soon(self._start_drain)
            elif self._timer is None:
                # the acknowledgement of the last outstanding batch starts the drain,
                # unless more input is queued (then the linger does)
                self._timer = asyncio.get_running_loop().call_later(self._linger, self._start_drain)
                self._lingering = True

    def _start_drain(self) -> None:
        self._cancel_timer()
        self._drain_task()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._lingering = False

    def _drain_task(self) -> asyncio.Task[None]:
        task = asyncio.ensure_future(self._drain_now())
        self._drains.add(task)
        task.add_done_callback(self._drain_done)
        return task

    def _drain_done(self, task: asyncio.Task[None]) -> None:
        self._drains.discard(task)
        if task.cancelled():  # the records it took are not sent: no later commit may pass
            self._failed(asyncio.CancelledError("a drain was cancelled; its records are lost"))

    async def _drain(self) -> None:
        # In a task of its own: a caller cancelled mid-drain (a commit as the worker
        # stops) must not drop the records already taken from `_waiting`.
        await asyncio.shield(self._drain_task())

    async def _drain_now(self) -> None:
        """Hand every waiting record to aiokafka; records added meanwhile (while a send
        waits for its partition's previous batch to go out) are taken in the same drain,
        so under load batches grow by themselves instead of by the linger."""
        async with self._drain_lock:
            while self._waiting:
                self._cancel_timer()
                waiting, self._waiting, self._waiting_count = self._waiting, {}, 0
                self._round_start, round_end = self._submitted, self._added
                try:
                    await self._submit_all(waiting)
                except Exception as exc:  # producer closed, timed out waiting for a slot
                    self._failed(exc)
                    return
                self._submitted = round_end
                self._wake_submit_waiters()

    def _wake_submit_waiters(self) -> None:
        """Wake the flushes whose records are all handed to aiokafka (all of them once
        a drain failed: nothing more will be submitted)."""
        still: list[tuple[int, asyncio.Future[None]]] = []
        for mark, waiter in self._submit_waiters:
            if self._failure is None and mark > self._submitted:
                still.append((mark, waiter))
            elif not waiter.done():
                waiter.set_result(None)
        self._submit_waiters = still

    async def _submit_all(self, waiting: dict[tuple[str, int | None], list[_Record]]) -> None:
        producer = self._producer()
        for (topic, partition), records in waiting.items():
            if partition is not None:
                await self._submit(producer, topic, partition, records)
                continue
            for by_key, group in await self._by_partition(producer, topic, records):
                await self._submit(producer, topic, by_key, group)

    async def _by_partition(
        self, producer: Any, topic: str, records: list[_Record]
    ) -> list[tuple[int, list[_Record]]]:
        """Records split by the partition Kafka's default partitioner gives their key."""
        await wait_on_metadata(producer, topic)
        count = default_partition_count(producer, topic)
        cache = self._partition_of
        if self._partition_counts.setdefault(topic, count) != count:
            cache.clear()  # partitions were added to a topic: keys move
            self._partition_counts[topic] = count
        groups: dict[int, list[_Record]] = {}
        for record in records:
            key = record.key
            if key is None:
                partition = default_partition(producer, topic, key, record.value)
            else:
                cached = cache.get((topic, key))
                if cached is None:
                    cached = (
                        default_partition(producer, topic, key, record.value)
                        if count is None
                        else key_partition(key, count)
                    )
                    if len(cache) >= MAX_CACHED_PARTITIONS:
                        cache.clear()
                    cache[topic, key] = cached
                partition = cached
            groups.setdefault(partition, []).append(record)
        return list(groups.items())

    async def _submit(
        self, producer: Any, topic: str, partition: int, records: list[_Record]
    ) -> None:
        builder = producer.create_batch()
        first = 0
        for index, record in enumerate(records):
            if _append(builder, record) is None:  # full: send it, start the next with this
                await self._send_batch(producer, builder, topic, partition, records[first:index])
                builder = producer.create_batch()
                first = index
                _append(builder, record)  # an empty batch takes any one record
        await self._send_batch(producer, builder, topic, partition, records[first:])

    async def _send_batch(
        self, producer: Any, builder: Any, topic: str, partition: int, records: list[_Record]
    ) -> None:
        builder.close()  # closed: aiokafka sends it without lingering
        delivered: asyncio.Future[Any] = await producer.send_batch(
            builder, topic, partition=partition
        )
        self._unacked[delivered] = self._round_start
        delivered.add_done_callback(
            lambda future: self._on_batch_done(future, topic, partition, records)
        )

    def _on_batch_done(
        self, future: asyncio.Future[Any], topic: str, partition: int, records: list[_Record]
    ) -> None:
        self._unacked.pop(future, None)
        if (
            self._send_when_idle
            and not self._unacked
            and self._waiting
            and not self._drain_lock.locked()
            and not self.input_waiting()
        ):
            self._start_drain()  # nothing outstanding any more: what waited goes now
        if future.cancelled():
            self._failed(asyncio.CancelledError(f"batch for {topic}[{partition}] cancelled"))
            return
        exc = future.exception()
        if exc is not None:
            self._failed(exc)
            return
        base = future.result().offset
        for index, record in enumerate(records):
            if record.on_delivered is not None:
                record.on_delivered(base + index)
        if self._on_delivered_batch is not None:
            self._on_delivered_batch(topic, partition, base + len(records) - 1)

    def _failed(self, exc: BaseException) -> None:
        first = self._failure is None
        self._failure = self._failure or exc
        self._wake_submit_waiters()
        if first:
            log.error("records could not be delivered, stopping the worker: %r", exc)
            self._on_failure(exc)


def _append(builder: Any, record: _Record) -> Any:
    """Add `record` to an aiokafka batch; None when the batch is full."""
    return builder.append(
        key=record.key, value=record.value, timestamp=None, headers=record.headers or []
    )
