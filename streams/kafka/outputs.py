"""Where the worker's records go: verdicts, warnings, dead letters, the table's changelog.

`Outputs` is what the worker and the OTel bridge send through: `send` a record (with a
callback once the broker acknowledged it), `add_changelog` a table record, `flush`
before each offset commit. `BatchedOutputs` (`streams.kafka.batched_outputs`) is the
worker's own, one aiokafka batch per partition. Under `exactly_once` faust's transaction
manager must produce every record, so `FaustOutputs` sends through faust topics instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Protocol

Headers = Sequence[tuple[str, bytes]]
OnDelivered = Callable[[int], None]
"""Called with the record's offset once the broker acknowledged it."""


class Outputs(Protocol):
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
        """Produce a record to `partition`, or (None) partitioned by key (Kafka's default
        partitioner). The caller checks that `partition` exists."""

    def add_changelog(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        """Produce a table changelog record (value None: a tombstone) to `partition`."""

    async def flush(self) -> None:
        """Return once every record produced so far is acknowledged (raise if one failed)."""


class OutputFailed(RuntimeError):
    """A batch could not be delivered; the worker must not commit past its events."""


class FaustOutputs:
    """Every record through faust (exactly_once: its transaction manager produces them).

    `topics` maps a topic name to its faust topic. Changelog records are faust's own
    (the table sends them), so `add_changelog` is never called.
    """

    def __init__(self, topics: dict[str, Any]) -> None:
        self._topics = topics

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
        sent: asyncio.Future[Any] = await self._topics[topic].send(
            key=key, value=value, partition=partition, headers=list(headers) if headers else None
        )
        if on_delivered is not None:
            callback = on_delivered

            def done(future: asyncio.Future[Any]) -> None:
                if not future.cancelled() and future.exception() is None:
                    callback(future.result().offset)

            sent.add_done_callback(done)

    def add_changelog(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        raise NotImplementedError("faust writes the changelog itself under exactly_once")

    async def flush(self) -> None:
        """faust's commit flushes its own producer."""
