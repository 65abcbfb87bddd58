"""`streams.kafka.faust_ext.loop_consumer`: faust's consumer "thread" runs on the worker's own
event loop; what faust hands over to it runs where it is called, with no thread hop.
(A ready worker running as a single OS thread: tests/integration/test_worker_health.py.)"""

from __future__ import annotations

import asyncio
import threading

import pytest

from loopwatch.streams.kafka.faust_ext.loop_consumer import SameLoopConsumerThread
from loopwatch.streams.worker.app import create_app
from tests.stream.settings_for_tests import stream_settings


def _consumer_thread() -> SameLoopConsumerThread:
    app = create_app(stream_settings())
    thread = app.consumer._thread
    assert isinstance(thread, SameLoopConsumerThread)
    return thread


async def test_the_consumer_thread_uses_the_calling_loop() -> None:
    thread = _consumer_thread()
    loop = asyncio.get_running_loop()
    assert thread.thread_loop is loop
    assert thread.parent_loop is loop


async def test_a_call_runs_on_the_calling_thread_and_returns_its_result() -> None:
    thread = _consumer_thread()
    caller = threading.get_ident()

    async def coroutine_call(value: int) -> tuple[int, int]:
        return threading.get_ident(), value * 2

    def plain_call(*, value: int) -> tuple[int, int]:  # faust hands over both kinds
        return threading.get_ident(), value + 1

    assert await thread.call_thread(coroutine_call, 21) == (caller, 42)
    assert await thread.call_thread(plain_call, value=1) == (caller, 2)


async def test_a_call_that_fails_raises_to_the_caller() -> None:
    thread = _consumer_thread()

    async def failing() -> None:
        raise LookupError("no such partition")

    with pytest.raises(LookupError, match="no such partition"):
        await thread.call_thread(failing)


async def test_a_cast_runs_in_the_background_on_the_same_thread() -> None:
    thread = _consumer_thread()
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def cast_call() -> None:
        done.set_result(threading.get_ident())

    await thread.cast_thread(cast_call)
    assert await asyncio.wait_for(done, timeout=5) == threading.get_ident()
