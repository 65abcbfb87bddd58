"""Reads `loop-verdicts` for this process's sessions only.

A manually assigned consumer (no group: nothing to rebalance, no offsets to commit)
holds just the partitions that the live sessions' keys map to, found with the same
partitioner the producers use (murmur2 of the key bytes, as in the Java client). A
partition is read from its end offset as of the moment its first session started, so
the history before that is never fetched, and no verdict of a session started since can
be missed (the end offset is taken before the session publishes anything).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.partitioner import DefaultPartitioner
from pydantic import ValidationError

from models import VERDICT_ADAPTER, LoopVerdict

log = logging.getLogger(__name__)

OnVerdict = Callable[[LoopVerdict], None]

_ERROR_BACKOFF_SECONDS = 0.5  # before fetching again after a broker error


def partition_for(session_id: str, partitions: int) -> int:
    """The partition a record keyed by `session_id` goes to (the producers' partitioner)."""
    ids = list(range(partitions))
    partition: int = DefaultPartitioner()(session_id.encode("utf-8"), ids, ids)
    return partition


class VerdictReader:
    """Delivers each verdict of a watched session to that session's callback."""

    def __init__(self, consumer: AIOKafkaConsumer, topic: str, partitions: int) -> None:
        self._consumer = consumer
        self._topic = topic
        self._partitions = partitions
        self._handlers: dict[bytes, OnVerdict] = {}
        self._sessions_on: dict[int, int] = {}  # partition -> live sessions mapped to it
        self._positions: dict[int, int] = {}  # partition -> next offset to read
        self._assigned = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.bad_records = 0
        """Records on the verdicts topic that did not decode (skipped)."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="loopwatch-verdict-reader")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def assigned_partitions(self) -> set[int]:
        return set(self._positions)

    async def watch(self, session_id: str, on_verdict: OnVerdict) -> None:
        """Deliver the session's verdicts from now on; call before its first event."""
        key = session_id.encode("utf-8")
        if key in self._handlers:
            raise ValueError(f"session {session_id!r} is already open in this client")
        partition = partition_for(session_id, self._partitions)
        async with self._lock:
            if partition not in self._positions:
                tp = TopicPartition(self._topic, partition)
                ends = await self._consumer.end_offsets([tp])
                self._positions[partition] = ends[tp]
                self._reassign()
            self._sessions_on[partition] = self._sessions_on.get(partition, 0) + 1
            self._handlers[key] = on_verdict

    def unwatch(self, session_id: str) -> None:
        """Stop delivering; the partition is released when no live session maps to it."""
        key = session_id.encode("utf-8")
        if self._handlers.pop(key, None) is None:
            return
        partition = partition_for(session_id, self._partitions)
        self._sessions_on[partition] -= 1
        if self._sessions_on[partition] == 0:
            del self._sessions_on[partition]
            del self._positions[partition]
            self._reassign()

    def _reassign(self) -> None:
        # `assign` replaces the whole assignment and forgets positions: seek every
        # partition back to where this reader is (synchronously, so no fetch sees a gap).
        tps = [TopicPartition(self._topic, p) for p in sorted(self._positions)]
        self._consumer.assign(tps)
        for tp in tps:
            self._consumer.seek(tp, self._positions[tp.partition])
        if tps:
            self._assigned.set()
        else:
            self._assigned.clear()

    async def _run(self) -> None:
        while True:
            await self._assigned.wait()
            try:
                batches = await self._consumer.getmany(timeout_ms=500, max_records=1000)
            except KafkaError as exc:
                log.warning("verdict reader: %s; retrying", type(exc).__name__)
                await asyncio.sleep(_ERROR_BACKOFF_SECONDS)
                continue
            for tp, records in batches.items():
                if tp.partition not in self._positions:
                    continue  # released while this batch was in flight
                for record in records:
                    if record.offset < self._positions[tp.partition]:
                        continue  # fetched before a re-seek; already seen or not wanted
                    self._positions[tp.partition] = record.offset + 1
                    self._deliver(record)

    def _deliver(self, record: Any) -> None:
        handler = self._handlers.get(record.key)
        if handler is None or record.value is None:
            return  # another process's session
        try:
            verdict = VERDICT_ADAPTER.validate_json(record.value)
        except ValidationError:
            self.bad_records += 1
            log.warning("verdict reader: undecodable verdict at offset %d", record.offset)
            return
        handler(verdict)
