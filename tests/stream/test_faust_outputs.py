"""Under exactly_once the worker's records go through faust (its transaction manager
produces them): `FaustOutputs`, and the table writes its own changelog."""

from __future__ import annotations

import asyncio
from typing import Any

from loopwatch.streams.kafka.batched_outputs import BatchedOutputs
from loopwatch.streams.kafka.outputs import FaustOutputs
from loopwatch.streams.worker.app import create_app
from tests.stream.settings_for_tests import stream_settings


class _Topic:
    """A faust topic's `send`: records the call, returns a future the test completes."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.futures: list[asyncio.Future[Any]] = []

    async def send(self, **kwargs: Any) -> asyncio.Future[Any]:
        self.calls.append(kwargs)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future


async def _callbacks_ran(future: asyncio.Future[Any]) -> None:
    """Wait until the callbacks added to `future` before this one have run (in order)."""
    ran = asyncio.Event()
    future.add_done_callback(lambda _: ran.set())
    await asyncio.wait_for(ran.wait(), timeout=5)


class _Metadata:
    def __init__(self, offset: int) -> None:
        self.offset = offset


async def test_exactly_once_builds_faust_outputs_and_leaves_the_changelog_to_faust() -> None:
    app = create_app(stream_settings(processing_guarantee="exactly_once"))
    # The consumer flushes the outputs before each commit (passed to it explicitly).
    assert app.transport.before_commit is not None
    outputs = app.loopwatch_outputs
    assert isinstance(outputs, FaustOutputs)
    assert app.loopwatch_table.outputs is None
    assert not app.loopwatch_store.deferred  # faust writes each event's record itself


async def test_at_least_once_builds_batched_outputs_for_records_and_changelog() -> None:
    app = create_app(stream_settings())
    assert app.transport.before_commit is not None
    outputs = app.loopwatch_outputs
    assert isinstance(outputs, BatchedOutputs)
    assert app.loopwatch_table.outputs is outputs
    assert app.loopwatch_store.deferred  # one record per session per commit


async def test_faust_outputs_send_through_the_topic_and_report_delivery() -> None:
    topic = _Topic()
    outputs = FaustOutputs({"loop-verdicts": topic})
    delivered: list[int] = []
    await outputs.send(
        "loop-verdicts", b"s1", b"{}", headers=[("h", b"v")], on_delivered=delivered.append
    )
    assert topic.calls == [
        {"key": b"s1", "value": b"{}", "partition": None, "headers": [("h", b"v")]}
    ]
    assert delivered == []  # not before the broker acknowledged it
    topic.futures[0].set_result(_Metadata(41))
    await _callbacks_ran(topic.futures[0])
    assert delivered == [41]


async def test_faust_outputs_send_a_reply_partition_through_the_topic() -> None:
    topic = _Topic()
    outputs = FaustOutputs({"loop-verdicts": topic})
    await outputs.send("loop-verdicts", b"s1", b"{}", partition=2)
    assert topic.calls == [{"key": b"s1", "value": b"{}", "partition": 2, "headers": None}]


async def test_faust_outputs_report_no_delivery_for_a_failed_send() -> None:
    topic = _Topic()
    outputs = FaustOutputs({"loop-verdicts": topic})
    delivered: list[int] = []
    await outputs.send("loop-verdicts", b"s1", b"{}", on_delivered=delivered.append)
    topic.futures[0].set_exception(RuntimeError("broker gone"))
    await _callbacks_ran(topic.futures[0])
    assert delivered == []
    await outputs.flush()  # faust's own commit flushes its producer
