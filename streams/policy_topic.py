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
START_TIMEOUT_SECONDS = 10.0
"""A start-up read of the policy topic that takes longer is abandoned and begun again."""
RETRY_SECONDS = 1.0

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


async def delete_policy(settings: Settings, key: str) -> None:
    """Publish a tombstone for `key` (its policy is removed), acknowledged by all in-sync
    replicas."""
    producer = AIOKafkaProducer(**settings.aiokafka_kwargs(), acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(
            settings.config_topic, None, key=key.encode(), partition=PARTITION
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
        self._next_offset = 0

    async def run(self) -> None:
        """Follow the topic for as long as the worker runs. A broker error (or a read that
        hangs at start-up) restarts the read after a short backoff instead of ending the
        task: events wait for `loaded`, so a dead follower would stall every partition."""
        while True:
            try:
                await self._follow()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any client failure: log it, read again
                log.warning(
                    "reading %s failed (%s); reading it again in %g s",
                    self._settings.config_topic,
                    type(exc).__name__,
                    RETRY_SECONDS,
                )
                await asyncio.sleep(RETRY_SECONDS)  # backoff before the next attempt

    async def _follow(self) -> None:
        # A read begun again resumes after the last record folded in: folding a record twice
        # could give a version-less record a second version number.
        consumer = _consumer(self._settings)
        try:
            await asyncio.wait_for(consumer.start(), START_TIMEOUT_SECONDS)
            tp = TopicPartition(self._settings.config_topic, PARTITION)
            consumer.assign([tp])
            consumer.seek(tp, self._next_offset)  # out of range (compacted): the earliest
            ends = await asyncio.wait_for(consumer.end_offsets([tp]), START_TIMEOUT_SECONDS)
            while True:
                if not self.loaded.is_set():
                    position = await asyncio.wait_for(consumer.position(tp), START_TIMEOUT_SECONDS)
                    if position >= ends[tp]:
                        self.loaded.set()
                batches = await consumer.getmany(tp, timeout_ms=1000)
                records = batches.get(tp, [])
                await _fold(self._book, records, self._on_invalid)
                if records:
                    self._next_offset = records[-1].offset + 1
        finally:
            await consumer.stop()
