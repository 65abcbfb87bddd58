"""Reads `loop-verdicts` and hands each verdict of a watched session to that session.

**Reply partitions** (the default; docs/contract.md §5.1, docs/client.md). Each runtime
process reads only a part of the verdicts topic, and its events name the partition
their verdicts go to (the `loopwatch-reply-partition` header, stamped by `stamp`):

* **Claims.** `PartitionClaim` (`streams.client.claim`) is a member of a consumer group
  on the verdicts topic (one group per deployment). Kafka assigns the topic's partitions
  to the live members, so two live processes never claim the same partition, and a
  restarted or new process gets its share back by the group's rebalance (nothing to
  store). The member fetches
  nothing: its partitions are paused; it only polls to stay in the group.
* **Reading.** A second, manually assigned consumer (no group) reads what this process
  claims, positioned at the end offsets taken when a partition is added; a partition
  already read keeps its position through a change. A process given no partition (more
  processes than partitions), or whose group has not assigned it yet, reads one
  fallback partition of its own choosing and stamps it: processes that share a
  partition skip each other's records by key, as every process did before.
* **Stamps.** A session's events are stamped with one of the partitions read (by a hash
  of its id). While the session still waits for verdicts on a partition, its events keep
  that stamp, so its verdicts arrive in order; the stamp moves to a claimed partition
  only when none is outstanding. A partition no longer claimed is read on until no
  session waits for a verdict there, so a rebalance loses no verdict.

Without a claim (`reply_partitions=False` on the client), the consumer holds every
partition of the topic from the client's start and events carry no header: verdicts
go by key, and every process receives the verdicts of the whole fleet (records of
sessions it does not watch are skipped by key before decoding).

Either way opening or closing a session costs no broker round trip, and no verdict of a
session opened later can be missed: positions are taken before any event is stamped
with their partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.partitioner import DefaultPartitioner
from pydantic import ValidationError

from loopwatch.models import VERDICT_ADAPTER, LoopVerdict
from loopwatch.streams.cancelling import raise_if_cancelling
from loopwatch.streams.client.claim import PartitionClaim

log = logging.getLogger(__name__)

OnVerdict = Callable[[LoopVerdict, float | None], None]
"""Called with a verdict and its record's timestamp (seconds since the epoch)."""

ERROR_BACKOFF_SECONDS = 0.5
"""Before fetching again after a broker error."""
FETCH_MAX_WAIT_MS = 50
"""The broker's long-poll wait. The fetch returns as soon as a verdict is there, so this
only bounds how stale an idle fetch gets (aiokafka's default is 500 ms)."""


def partition_for(session_id: str, partitions: int) -> int:
    """The partition a record keyed by `session_id` goes to (the producers' partitioner)."""
    ids = list(range(partitions))
    partition: int = DefaultPartitioner()(session_id.encode("utf-8"), ids, ids)
    return partition


class VerdictReader:
    """Delivers each verdict of a watched session to that session's callback."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        topic: str,
        partitions: int,
        claim: PartitionClaim | None = None,
        *,
        fallback: int | None = None,
    ) -> None:
        """`claim`: read only the partitions it claims (and stamp them); None: read
        every partition. `fallback`: the partition read while nothing is claimed
        (default: one chosen at random)."""
        self._consumer = consumer
        self._topic = topic
        self._partitions = partitions
        self._claim = claim
        if fallback is None:
            fallback = uuid.uuid4().int % partitions
        self._fallback = fallback
        self._handlers: dict[bytes, OnVerdict] = {}
        self._assigned: set[int] = set()
        self._usable: tuple[int, ...] = ()  # stamped on new sessions: read and positioned
        # session key -> [stamped partition, verdicts still due there]
        self._due: dict[bytes, list[int]] = {}
        self._due_by_partition: Counter[int] = Counter()
        self._reassign = False
        self._positioned = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.bad_records = 0
        """Records on the verdicts topic that did not decode (skipped)."""
        self.records_received = 0
        """Records fetched from the verdicts topic (this process's and others' sessions)."""
        self.bytes_received = 0
        """Their keys' and values' bytes."""

    async def start(self) -> None:
        """Position on the partitions to read (all, or the fallback until the claim's
        first assignment), then read in the background."""
        if self._claim is None:
            await self._assign(set(range(self._partitions)))
        else:
            self._claim.on_change = self._claim_changed
            await self._assign(self._wanted())
            await self._claim.start()
        self._task = asyncio.create_task(self._run(), name="loopwatch-verdict-reader")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._claim is not None:
            await self._claim.stop()

    @property
    def assigned_partitions(self) -> set[int]:
        """The partitions this process reads now."""
        return set(self._assigned)

    @property
    def claimed_partitions(self) -> set[int] | None:
        """The partitions the group assigned to this process (None: no claim, all read)."""
        return None if self._claim is None else set(self._claim.claimed)

    @property
    def watched_sessions(self) -> int:
        return len(self._handlers)

    async def claimed(self) -> set[int]:
        """Wait until the group has assigned this process its partitions and they are
        read (for benches and tests; a runtime need not wait: until then it uses the
        fallback partition)."""
        if self._claim is None:
            return set(range(self._partitions))
        while self._claim.assignments == 0 or not set(self._claim.claimed) <= self._assigned:
            await self.reassigned()
        return set(self._claim.claimed)

    def reassigned(self) -> Coroutine[Any, Any, Any]:
        """Awaitable: done once the partitions read are set again after this call (a
        claim change; the event is taken now, so a change right after is not missed)."""
        return self._positioned.wait()

    def watch(self, session_id: str, on_verdict: OnVerdict) -> None:
        """Deliver the session's verdicts from now on; call before its first event."""
        key = session_id.encode("utf-8")
        if key in self._handlers:
            raise ValueError(f"session {session_id!r} is already open in this client")
        self._handlers[key] = on_verdict

    def unwatch(self, session_id: str) -> None:
        """Stop delivering the session's verdicts."""
        key = session_id.encode("utf-8")
        self._handlers.pop(key, None)
        due = self._due.pop(key, None)
        if due is not None and due[1]:
            self._settled(due[0], due[1])

    def stamp(self, session_id: str) -> int | None:
        """The partition to name in the session's next event (None: no claim, by key);
        counts a verdict due there."""
        if self._claim is None:
            return None
        key = session_id.encode("utf-8")
        due = self._due.get(key)
        if due is not None and due[1] > 0:  # keep the session's verdicts in one partition
            partition = due[0]
            due[1] += 1
        else:
            usable = self._usable
            if due is not None and due[0] in usable:
                partition = due[0]
            else:
                partition = usable[zlib.crc32(key) % len(usable)]
            self._due[key] = [partition, 1]
        self._due_by_partition[partition] += 1
        return partition

    def _claim_changed(self, _claimed: frozenset[int]) -> None:
        self._reassign = True

    def _settled(self, partition: int, verdicts: int) -> None:
        left = self._due_by_partition[partition] - verdicts
        if left > 0:
            self._due_by_partition[partition] = left
            return
        del self._due_by_partition[partition]
        if partition not in self._usable:
            self._reassign = True  # read no longer needed there

    def _wanted(self) -> set[int]:
        claimed = set() if self._claim is None else set(self._claim.claimed)
        wanted = claimed | set(self._due_by_partition)
        if not claimed:
            wanted.add(self._fallback)
        return wanted

    async def _assign(self, wanted: set[int]) -> None:
        """Read `wanted`: partitions read already keep their positions (nothing of them
        is missed or re-read), new ones start at their end offsets now."""
        kept = wanted & self._assigned
        positions = {p: await self._consumer.position(self._tp(p)) for p in kept}
        self._consumer.assign([self._tp(p) for p in sorted(wanted)])
        added = [self._tp(p) for p in sorted(wanted - kept)]
        ends = await self._consumer.end_offsets(added) if added else {}
        for p, offset in positions.items():
            self._consumer.seek(self._tp(p), offset)
        for tp in added:
            self._consumer.seek(tp, ends[tp])
        self._assigned = set(wanted)
        done, self._positioned = self._positioned, asyncio.Event()
        done.set()
        claimed = () if self._claim is None else tuple(sorted(self._claim.claimed & wanted))
        self._usable = claimed or ((self._fallback,) if self._fallback in wanted else ())
        if self._claim is not None:
            log.debug("verdict reader: reading %s, stamping %s", sorted(wanted), self._usable)

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self._topic, partition)

    async def _run(self) -> None:
        while True:
            try:
                if self._reassign:
                    self._reassign = False
                    await self._assign(self._wanted())
                batches = await self._consumer.getmany(timeout_ms=500, max_records=1000)
            except KafkaError as exc:
                raise_if_cancelling()  # stopped as the read failed: stop, not retry
                log.warning("verdict reader: %s; retrying", type(exc).__name__)
                await asyncio.sleep(ERROR_BACKOFF_SECONDS)
                continue
            for records in batches.values():
                self.records_received += len(records)
                for record in records:
                    self._deliver(record)

    def _deliver(self, record: Any) -> None:
        key, value = record.key, record.value
        self.bytes_received += len(value or b"") + len(key or b"")
        handler = self._handlers.get(key)
        if handler is None or value is None:
            return  # another process's session
        due = self._due.get(key)
        if due is not None and due[1] > 0 and record.partition == due[0]:
            due[1] -= 1
            self._settled(due[0], 1)
        try:
            verdict = VERDICT_ADAPTER.validate_json(value)
        except ValidationError:
            self.bad_records += 1
            log.warning("verdict reader: undecodable verdict at offset %d", record.offset)
            return
        produced = record.timestamp / 1000 if record.timestamp is not None else None
        handler(verdict, produced)
