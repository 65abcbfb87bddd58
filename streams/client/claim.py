"""`PartitionClaim`: the verdict partitions a consumer group of runtime processes assigns
to this one (the reply partitions of docs/client.md; how they are read: `reader.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import KafkaError

from loopwatch.streams.cancelling import raise_if_cancelling

log = logging.getLogger(__name__)

CLAIM_POLL_MS = 1000
"""How often the claim's group member polls (it fetches nothing; polling keeps it in
the group, far inside aiokafka's `max_poll_interval_ms`)."""
ERROR_BACKOFF_SECONDS = 0.5
"""Before polling again after a broker error."""


def runtime_group(verdicts_topic: str) -> str:
    """The default consumer group of a deployment's runtime processes."""
    return f"loopwatch-runtimes.{verdicts_topic}"


class PartitionClaim(ConsumerRebalanceListener):  # type: ignore[misc]
    """The verdict partitions the group assigns to this process (`claimed`).

    `consumer` is a not yet started `AIOKafkaConsumer` with the group id; `on_change` is
    called with each new assignment. During a rebalance the previous claim stays in
    use (revocation changes nothing here): its verdicts are read on anyway.
    """

    def __init__(self, consumer: AIOKafkaConsumer, topic: str) -> None:
        self._consumer = consumer
        self._topic = topic
        self.claimed: frozenset[int] = frozenset()
        self.assignments = 0
        """How many assignments the group has made to this process."""
        self.on_change: Callable[[frozenset[int]], None] = lambda _claimed: None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._consumer.start()
        self._consumer.subscribe([self._topic], listener=self)
        self._task = asyncio.create_task(self._poll(), name="loopwatch-verdict-claim")

    async def stop(self) -> None:
        """Leave the group (the others rebalance at once) and stop."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._consumer.stop()

    async def _poll(self) -> None:
        while True:
            try:
                await self._consumer.getmany(timeout_ms=CLAIM_POLL_MS)  # all paused
            except KafkaError as exc:
                raise_if_cancelling()  # stopped as the poll failed: stop, not retry
                log.warning("verdict partition claim: %s; retrying", type(exc).__name__)
                await asyncio.sleep(ERROR_BACKOFF_SECONDS)

    async def on_partitions_revoked(self, revoked: Any) -> None:
        """Nothing: the previous claim is stamped and read until the next assignment."""

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if assigned:
            self._consumer.pause(*assigned)  # membership only: never fetch
        self.claimed = frozenset(tp.partition for tp in assigned)
        self.assignments += 1
        log.info("verdict partitions claimed: %s", sorted(self.claimed) or "none")
        self.on_change(self.claimed)
