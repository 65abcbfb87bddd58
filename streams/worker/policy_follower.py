"""Reading and writing the `loopwatch-config` topic (docs/contract.md §9.6-§9.7).

`read_policies` folds the whole topic once (for `loopwatch policy`); `PolicyFollower`
reads it from the beginning and then keeps following it, inside the worker, outside any
consumer group: every worker needs every policy. `PolicyDeadLetters` dead-letters the
invalid records once per fleet: the workers share a consumer group on the topic, and the
one member that holds its partition does it, committing how far it got.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import CommitFailedError

from loopwatch.models import InvalidPolicy, Policy, parse_policy
from loopwatch.models.policy import check_key
from loopwatch.streams.cancelling import raise_if_cancelling
from loopwatch.streams.kafka.dead_letters import DeadLetter, SourcePosition, dead_letter_headers
from loopwatch.streams.settings import Settings
from loopwatch.streams.worker.policy_book import PolicyBook

log = logging.getLogger(__name__)

PARTITION = 0
"""The topic has one partition (kafka_admin creates it so)."""
START_TIMEOUT_SECONDS = 10.0
"""A start-up read of the policy topic that takes longer is abandoned and begun again."""
RETRY_SECONDS = 1.0

OnInvalid = Callable[[Any, InvalidPolicy], Awaitable[None]]
"""Called with the consumer record and the error of each invalid record."""
OnDeadLettered = Callable[[Any, InvalidPolicy], None]
"""Called once a dead letter of an invalid record is acknowledged (the worker counts it)."""


def dead_letter_group(settings: Settings) -> str:
    """The consumer group whose committed offset on the policy topic says how far
    dead-lettering got: one per app id, so one per fleet."""
    return f"{settings.app_id}-policy-dead-letters"


def invalid(record: Any) -> InvalidPolicy | None:
    """Why a policy record cannot be used (what `PolicyBook.apply` would raise), or None."""
    try:
        if record.value is None:
            check_key(record.key)
        else:
            parse_policy(record.key, record.value)
    except InvalidPolicy as exc:
        return exc
    return None


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


async def _log_invalid(record: Any, error: InvalidPolicy) -> None:
    # Dead-lettered once per fleet by `PolicyDeadLetters`; each worker only says it.
    log.warning(
        "invalid policy record at offset %d (the key's policy stays): %s", record.offset, error
    )


async def read_policies(
    settings: Settings, book: PolicyBook, *, timeout: float = 30.0, on_invalid: OnInvalid = _ignore
) -> int:
    """Fold every record now on the topic into `book` (up to the end offset seen first);
    that end offset (offsets never go back, and compaction keeps them)."""
    consumer = _consumer(settings)
    await consumer.start()
    try:
        tp = TopicPartition(settings.config_topic, PARTITION)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end: int = (await consumer.end_offsets([tp]))[tp]
        deadline = time.monotonic() + timeout
        while await consumer.position(tp) < end:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"reading {settings.config_topic} took over {timeout:g} s")
            batches = await consumer.getmany(tp, timeout_ms=int(min(remaining, 1.0) * 1000))
            await _fold(book, batches.get(tp, []), on_invalid)
    finally:
        await consumer.stop()
    return end


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

    def __init__(
        self, settings: Settings, book: PolicyBook, on_invalid: OnInvalid = _log_invalid
    ) -> None:
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
        await _retrying(self._follow, f"reading {self._settings.config_topic}")

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


class PolicyDeadLetters:
    """Dead-letters each invalid record of the policy topic once per fleet (contract §9.7).

    Every worker runs one; they share the consumer group `dead_letter_group`, so one
    member at a time holds the topic's partition. It reads from the group's committed
    offset, sends each invalid record to the dead-letter topic, and once the broker has
    acknowledged the dead letter (acks=all) commits the offset after it; after each batch
    it commits the offset after the batch. The committed offset thus promises that every
    invalid record below it has been dead-lettered. A crash (or a hand-over in a
    rebalance) between an acknowledged dead letter and its commit has the next holder
    dead-letter that record again: a duplicate, never a loss.
    """

    def __init__(self, settings: Settings, on_dead_lettered: OnDeadLettered | None = None) -> None:
        self._settings = settings
        self._on_dead_lettered = on_dead_lettered

    async def run(self) -> None:
        """For as long as the worker runs: a broker error restarts the work after a short
        backoff (resuming from the committed offset) instead of ending the task."""
        what = f"dead-lettering invalid records of {self._settings.config_topic}"
        await _retrying(self._serve, what)

    async def _serve(self) -> None:
        settings = self._settings
        consumer = AIOKafkaConsumer(
            settings.config_topic,
            **settings.aiokafka_kwargs(),
            client_id=f"{settings.app_id}-policy-dead-letters",
            group_id=dead_letter_group(settings),
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # no committed offset yet: every record
        )
        producer = AIOKafkaProducer(**settings.aiokafka_kwargs(), acks="all")
        try:
            await asyncio.wait_for(consumer.start(), START_TIMEOUT_SECONDS)
            await asyncio.wait_for(producer.start(), START_TIMEOUT_SECONDS)
            while True:
                batches = await consumer.getmany(timeout_ms=1000)
                for tp, records in batches.items():
                    try:
                        for record in records:
                            error = invalid(record)
                            if error is not None:
                                await self._dead_letter(producer, record, error)
                                await consumer.commit({tp: record.offset + 1})
                        if records:
                            await consumer.commit({tp: records[-1].offset + 1})
                    except CommitFailedError:
                        # The partition went to another member in a rebalance: it goes
                        # on from the committed offset (this batch's records again).
                        log.info("%s changed hands; the new holder goes on", tp)
        finally:
            await consumer.stop()
            await producer.stop()

    async def _dead_letter(
        self, producer: AIOKafkaProducer, record: Any, error: InvalidPolicy
    ) -> None:
        letter = DeadLetter("policy", str(error))
        source = SourcePosition(record.topic, record.partition, record.offset)
        log.warning(
            "dead letter policy at %s[%d]@%d: %s",
            source.topic,
            source.partition,
            source.offset,
            letter.reason,
        )
        await producer.send_and_wait(
            self._settings.dlq_topic,
            record.value,
            key=record.key,
            headers=dead_letter_headers(letter, source),
        )
        if self._on_dead_lettered is not None:
            self._on_dead_lettered(record, error)


async def _retrying(attempt: Callable[[], Awaitable[None]], what: str) -> NoReturn:
    """Run `attempt` again and again: any client failure is logged and retried after
    `RETRY_SECONDS` (cancellation ends it)."""
    while True:
        try:
            await attempt()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise_if_cancelling()  # stopped as the attempt failed (3.11's wait_for): stop
            log.warning("%s failed (%s); again in %g s", what, type(exc).__name__, RETRY_SECONDS)
        await asyncio.sleep(RETRY_SECONDS)  # backoff before the next attempt
