"""Reads `loop-verdicts` and hands each verdict of a watched session to that session.

A manually assigned consumer (no group: nothing to rebalance, no offsets to commit)
holds every partition of the topic from the client's start, positioned at the end
offsets taken then, and never changes that assignment. So opening or closing a session
costs no broker round trip, and the long-poll fetch in flight is never abandoned
(re-`assign`ing per session did both, and verdicts whose delivery overlapped a
reassignment waited for the next fetch: docs/performance.md). No verdict of a
session opened later can be missed: the positions were taken before it published.

The price: the client receives the verdicts of the whole fleet. Records of sessions this
process does not watch are skipped by key before decoding; the traffic is one verdict
record of the fleet per verdict per runtime process.
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

from loopwatch.models import VERDICT_ADAPTER, LoopVerdict

log = logging.getLogger(__name__)

OnVerdict = Callable[[LoopVerdict, float | None], None]
"""Called with a verdict and its record's timestamp (seconds since the epoch)."""

_ERROR_BACKOFF_SECONDS = 0.5  # before fetching again after a broker error
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

    def __init__(self, consumer: AIOKafkaConsumer, topic: str, partitions: int) -> None:
        self._consumer = consumer
        self._topic = topic
        self._partitions = partitions
        self._handlers: dict[bytes, OnVerdict] = {}
        self._assigned: set[int] = set()
        self._task: asyncio.Task[None] | None = None
        self.bad_records = 0
        """Records on the verdicts topic that did not decode (skipped)."""

    async def start(self) -> None:
        """Hold every partition from its end offset now, then read in the background."""
        tps = [TopicPartition(self._topic, p) for p in range(self._partitions)]
        self._consumer.assign(tps)
        ends = await self._consumer.end_offsets(tps)
        for tp in tps:
            self._consumer.seek(tp, ends[tp])
        self._assigned = {tp.partition for tp in tps}
        self._task = asyncio.create_task(self._run(), name="loopwatch-verdict-reader")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def assigned_partitions(self) -> set[int]:
        return set(self._assigned)

    @property
    def watched_sessions(self) -> int:
        return len(self._handlers)

    def watch(self, session_id: str, on_verdict: OnVerdict) -> None:
        """Deliver the session's verdicts from now on; call before its first event."""
        key = session_id.encode("utf-8")
        if key in self._handlers:
            raise ValueError(f"session {session_id!r} is already open in this client")
        self._handlers[key] = on_verdict

    def unwatch(self, session_id: str) -> None:
        """Stop delivering the session's verdicts."""
        self._handlers.pop(session_id.encode("utf-8"), None)

    async def _run(self) -> None:
        while True:
            try:
                batches = await self._consumer.getmany(timeout_ms=500, max_records=1000)
            except KafkaError as exc:
                log.warning("verdict reader: %s; retrying", type(exc).__name__)
                await asyncio.sleep(_ERROR_BACKOFF_SECONDS)
                continue
            for records in batches.values():
                for record in records:
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
        produced = record.timestamp / 1000 if record.timestamp is not None else None
        handler(verdict, produced)
