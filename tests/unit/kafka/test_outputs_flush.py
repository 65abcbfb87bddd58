"""`BatchedOutputs.flush()` waits for the records added before it, and only for those.

A fake producer hands out a future per batch and lets each `send_batch` call wait until
the test opens it (as aiokafka's does while the partition's previous batch is unsent),
so the tests decide the order of submissions and acknowledgements. No broker, no timers:
the linger is longer than any test.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from loopwatch.streams.kafka.batched_outputs import BatchedOutputs
from loopwatch.streams.kafka.outputs import OutputFailed

LONG_LINGER = 3600.0


class FakeBuilder:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes | None]] = []

    def append(self, *, key: Any, value: Any, timestamp: Any, headers: Any) -> object:
        self.records.append((key, value))
        return object()

    def close(self) -> None:
        pass


@dataclass
class Submitted:
    topic: str
    partition: int
    keys: list[bytes | None]
    acked: asyncio.Future[Any]

    def ack(self, offset: int = 0) -> None:
        self.acked.set_result(type("Meta", (), {"offset": offset})())


class _Client:
    async def _wait_on_metadata(self, topic: str) -> None:
        return None


@dataclass
class FakeProducer:
    """`send_batch` calls wait for `open_next()` when `gated`; `submitted` lists batches."""

    gated: bool = False
    fail_with: BaseException | None = None
    submitted: list[Submitted] = field(default_factory=list)
    client: _Client = field(default_factory=_Client)
    _gates: asyncio.Queue[None] = field(default_factory=asyncio.Queue)
    entered: asyncio.Event = field(default_factory=asyncio.Event)

    def create_batch(self) -> FakeBuilder:
        return FakeBuilder()

    def _partition(self, topic: str, *args: Any) -> int:
        return 0

    def open_next(self) -> None:
        self._gates.put_nowait(None)

    async def send_batch(self, builder: FakeBuilder, topic: str, *, partition: int) -> Any:
        self.entered.set()
        if self.gated:
            await self._gates.get()
        if self.fail_with is not None:
            raise self.fail_with
        acked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.submitted.append(Submitted(topic, partition, [k for k, _ in builder.records], acked))
        return acked


async def settle() -> None:
    """Let every ready callback and task run (nothing here waits on I/O or timers)."""
    for _ in range(50):
        await asyncio.sleep(0)


def outputs_for(producer: FakeProducer, failures: list[BaseException]) -> BatchedOutputs:
    return BatchedOutputs(
        lambda: producer, on_failure=failures.append, linger=LONG_LINGER, send_when_idle=False
    )


async def test_flush_returns_once_its_records_are_acknowledged_not_later_ones() -> None:
    producer = FakeProducer(gated=True)
    outputs = outputs_for(producer, [])
    await outputs.send("verdicts", b"a", b"1")
    flush = asyncio.ensure_future(outputs.flush())
    await producer.entered.wait()  # the drain is handing `a` over (waiting for a slot)
    await outputs.send("verdicts", b"b", b"2")  # an event processed during the flush
    producer.open_next()
    producer.open_next()
    await settle()
    assert [s.keys for s in producer.submitted] == [[b"a"], [b"b"]]
    producer.submitted[0].ack()
    await settle()
    assert flush.done(), "flush waited for a record added after it began"
    await flush
    assert not producer.submitted[1].acked.done()


async def test_flush_waits_for_every_record_added_before_it() -> None:
    producer = FakeProducer()
    outputs = outputs_for(producer, [])
    outputs.add_changelog("changelog", 0, b"a", b"1")
    outputs.add_changelog("changelog", 1, b"b", b"2")
    await outputs.send("verdicts", b"c", b"3")
    flush = asyncio.ensure_future(outputs.flush())
    await settle()
    assert len(producer.submitted) == 3
    for submitted in producer.submitted[:2]:
        submitted.ack()
    await settle()
    assert not flush.done()
    producer.submitted[2].ack()
    await flush


async def test_flush_waits_for_its_records_taken_by_a_drain_already_under_way() -> None:
    producer = FakeProducer(gated=True)
    outputs = outputs_for(producer, [])
    await outputs.send("verdicts", b"a", b"1")
    first = asyncio.ensure_future(outputs.flush())
    await producer.entered.wait()
    await outputs.send("verdicts", b"b", b"2")  # waits for the drain under way
    second = asyncio.ensure_future(outputs.flush())
    await settle()
    producer.open_next()
    producer.open_next()
    await settle()
    producer.submitted[0].ack()
    await settle()
    assert first.done()
    assert not second.done(), "the second flush did not wait for a record added before it"
    producer.submitted[1].ack()
    await second


async def test_a_failed_drain_fails_the_flush_waiting_for_it() -> None:
    failures: list[BaseException] = []
    producer = FakeProducer(fail_with=RuntimeError("producer closed"))
    outputs = outputs_for(producer, failures)
    await outputs.send("verdicts", b"a", b"1")
    with pytest.raises(OutputFailed):
        await outputs.flush()
    assert len(failures) == 1
    with pytest.raises(OutputFailed):  # and every flush after it
        await outputs.flush()


async def test_an_unacknowledged_batch_fails_the_flush() -> None:
    failures: list[BaseException] = []
    producer = FakeProducer()
    outputs = outputs_for(producer, failures)
    await outputs.send("verdicts", b"a", b"1")
    flush = asyncio.ensure_future(outputs.flush())
    await settle()
    producer.submitted[0].acked.set_exception(RuntimeError("not delivered"))
    with pytest.raises(OutputFailed):
        await flush
    assert len(failures) == 1


async def test_a_cancelled_drain_fails_the_flush_and_every_later_one() -> None:
    failures: list[BaseException] = []
    producer = FakeProducer(gated=True)
    outputs = outputs_for(producer, failures)
    await outputs.send("verdicts", b"a", b"1")
    flush = asyncio.ensure_future(outputs.flush())
    await producer.entered.wait()  # the drain has taken `a` and waits for a slot
    for drain in list(outputs._drains):
        drain.cancel()
    with pytest.raises(OutputFailed):
        await flush
    assert len(failures) == 1
    producer.gated = False
    await outputs.send("verdicts", b"b", b"2")
    with pytest.raises(OutputFailed):  # `a` was never sent: no commit may pass it
        await outputs.flush()
