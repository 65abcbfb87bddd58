"""Feeds the board from `loop-warnings` and `loop-episodes`: one consumer without a group,
all partitions assigned by hand, read from `since` ago (or from the end)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from pydantic import ValidationError

from loopwatch.models import EPISODE_ADAPTER, VERDICT_ADAPTER
from loopwatch.streams.fleetview.board import FleetBoard
from loopwatch.streams.kafka.admin import BrokerUnreachable, connect_admin, partition_counts
from loopwatch.streams.kafka.authorized import missing_topic_rights
from loopwatch.streams.settings import Settings

log = logging.getLogger(__name__)

CONNECT_SECONDS = 15.0
TOPIC_CHECK_SECONDS = 5.0
"""How often a topic that does not exist yet is looked for again."""


class FeedError(RuntimeError):
    """The feed cannot start (missing topic); the message says what to do."""


@dataclass(frozen=True)
class FeedTopics:
    warnings: str
    episodes: str


class BoardFeed:
    """Reads both topics into `board`, calling `on_change` after each batch."""

    def __init__(
        self,
        settings: Settings,
        topics: FeedTopics,
        board: FleetBoard,
        on_change: Callable[[], None],
        since_seconds: float,
    ) -> None:
        self.settings = settings
        self.topics = topics
        self.board = board
        self.on_change = on_change
        self.since_seconds = since_seconds
        self.episodes_found = False
        self._consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._partitions: dict[str, int] = {}

    async def start(self) -> None:
        """Connect and assign; raises BrokerUnreachable or FeedError with a clear message."""
        self._admin = await connect_admin(self.settings, timeout=CONNECT_SECONDS)
        names = [self.topics.warnings, self.topics.episodes]
        counts = await partition_counts(self._admin, names)
        missing = await missing_topic_rights(self._admin._client, [(n, ("READ",)) for n in names])
        if missing:
            await self.stop()
            raise FeedError(
                f"this principal lacks {', '.join(missing)}, which the dashboard needs: "
                "grant its rights (`loopwatch acls --role dashboard`)"
            )
        if self.topics.warnings not in counts:
            await self.stop()
            raise FeedError(
                f"topic {self.topics.warnings!r} does not exist: start the worker or run "
                "`loopwatch topics create` first, or name another with --warnings-topic"
            )
        self._partitions = counts
        self.episodes_found = self.topics.episodes in counts
        self.board.episodes_expected = self.episodes_found
        consumer = AIOKafkaConsumer(
            **self.settings.aiokafka_kwargs(),
            group_id=None,
            enable_auto_commit=False,
            request_timeout_ms=15_000,
        )
        try:
            await consumer.start()
        except KafkaError as exc:
            await consumer.stop()
            await self.stop()
            raise BrokerUnreachable(
                f"no Kafka broker at {self.settings.bootstrap_servers} ({exc})"
            ) from None
        self._consumer = consumer
        await self._assign()

    async def stop(self) -> None:
        if self._admin is not None:
            await self._admin.close()
            self._admin = None
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    async def run(self) -> None:
        """Read until cancelled; a record that does not decode is counted and skipped."""
        consumer = self._consumer
        assert consumer is not None, "start() first"
        next_check = time.monotonic() + TOPIC_CHECK_SECONDS
        while True:
            batches = await consumer.getmany(timeout_ms=1000, max_records=2000)
            for tp, records in batches.items():
                for record in records:
                    self._ingest(tp.topic, record.value)
            if batches:
                self.on_change()
            if not self.episodes_found and time.monotonic() >= next_check:
                next_check = time.monotonic() + TOPIC_CHECK_SECONDS
                assert self._admin is not None
                found = await partition_counts(self._admin, [self.topics.episodes])
                if found:
                    self._partitions.update(found)
                    log.info("topic %s appeared: reading loop episodes", self.topics.episodes)
                    self.episodes_found = self.board.episodes_expected = True
                    await self._assign()
                    self.on_change()

    def _ingest(self, topic: str, value: bytes | None) -> None:
        try:
            if topic == self.topics.warnings:
                self.board.add_warning(VERDICT_ADAPTER.validate_json(value or b""))
            else:
                self.board.add_episode(EPISODE_ADAPTER.validate_json(value or b""))
        except ValidationError:
            self.board.add_skipped()

    async def _assign(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        names = [self.topics.warnings] + ([self.topics.episodes] if self.episodes_found else [])
        positions = {tp: await consumer.position(tp) for tp in consumer.assignment()}
        tps = [TopicPartition(name, p) for name in names for p in range(self._partitions[name])]
        # `assign` forgets every position: keep the old ones, seek only the new partitions
        consumer.assign(tps)
        new = [tp for tp in tps if tp not in positions]
        for tp, offset in positions.items():
            consumer.seek(tp, offset)
        await self._seek_since(consumer, new)

    async def _seek_since(self, consumer: AIOKafkaConsumer, tps: list[TopicPartition]) -> None:
        if not tps:
            return
        ends = await consumer.end_offsets(tps)
        if self.since_seconds <= 0:
            for tp in tps:
                consumer.seek(tp, ends[tp])
            return
        start_ms = int((time.time() - self.since_seconds) * 1000)
        found = await consumer.offsets_for_times(dict.fromkeys(tps, start_ms))
        for tp in tps:
            hit = found.get(tp)
            consumer.seek(tp, ends[tp] if hit is None else hit.offset)


async def cancel_quietly(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
