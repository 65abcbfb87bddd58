"""Reading and writing the `loopwatch-config` topic (docs/contract.md §9.6-§9.7).

`read_policies` folds the whole topic once (for `loopwatch policy`); `PolicyFollower`
reads it from the beginning and then keeps following it, inside the worker, outside any
consumer group: every worker needs every policy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from loopwatch.models import InvalidPolicy, Policy
from loopwatch.streams.policy_book import PolicyBook
from loopwatch.streams.settings import Settings

log = logging.getLogger(__name__)

PARTITION = 0
"""The topic has one partition (kafka_admin creates it so)."""

OnInvalid = Callable[[Any, InvalidPolicy], Awaitable[None]]
"""Called with the consumer record and the error of each invalid record."""


def _consumer(settings: Settings) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        **settings.aiokafka_kwargs(),
        client_id=f"{settings.app_id}-policies",
        group_id=None,  # no group, no commits: always read from the beginning
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )


async def _fold(book: PolicyBook, records: list[Any], on_invalid: OnInvalid) -> None:
    for record in records:
        try:
            policy = book.apply(record.key, record.value)
        except InvalidPolicy as exc:
            await on_invalid(record, exc)
            continue
        if policy is None:
            log.info("policy removed at offset %d", record.offset)
        else:
            log.info("policy %s version %d in force", policy.key, policy.version)


async def _ignore(_record: Any, _error: InvalidPolicy) -> None:
    return None


async def read_policies(
    settings: Settings, book: PolicyBook, *, timeout: float = 30.0, on_invalid: OnInvalid = _ignore
) -> None:
    """Fold every record now on the topic into `book` (up to the end offset seen first)."""
    consumer = _consumer(settings)
    await consumer.start()
    try:
        tp = TopicPartition(settings.config_topic, PARTITION)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        deadline = time.monotonic() + timeout
        while await consumer.position(tp) < end:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"reading {settings.config_topic} took over {timeout:g} s")
            batches = await consumer.getmany(tp, timeout_ms=int(min(remaining, 1.0) * 1000))
            await _fold(book, batches.get(tp, []), on_invalid)
    finally:
        await consumer.stop()


async def write_policy(settings: Settings, policy: Policy) -> None:
    """Publish one policy record, acknowledged by all in-sync replicas."""
    producer = AIOKafkaProducer(**settings.aiokafka_kwargs(), acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(
            settings.config_topic, policy.to_json(), key=policy.key.encode(), partition=PARTITION
        )
    finally:
        await producer.stop()


class PolicyFollower:
    """Keeps a worker's `PolicyBook` up to date with the topic, for as long as it runs."""

    def __init__(self, settings: Settings, book: PolicyBook, on_invalid: OnInvalid) -> None:
        self._settings = settings
        self._book = book
        self._on_invalid = on_invalid
        self.loaded = asyncio.Event()
        """Set once every record that was on the topic at start-up has been folded in."""

    async def run(self) -> None:
        consumer = _consumer(self._settings)
        await consumer.start()
        try:
            tp = TopicPartition(self._settings.config_topic, PARTITION)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            while True:
                if not self.loaded.is_set() and await consumer.position(tp) >= end:
                    self.loaded.set()
                batches = await consumer.getmany(tp, timeout_ms=1000)
                await _fold(self._book, batches.get(tp, []), self._on_invalid)
        finally:
            await consumer.stop()
