"""faust's consumer "thread" run on the worker's own event loop, without a thread.

faust runs aiokafka's consumer in a thread of its own (`AIOKafkaConsumerThread`, a mode
`ServiceThread` with a second event loop), and every call into it (each fetch of
records, each position, commit and seek) crosses over through a method queue: a future
and a `call_soon_threadsafe` (a write to the other loop's self-pipe) each way. The
worker processes records inline on the main loop, so the thread buys no parallelism
(the GIL lets one of the two run at a time), and it costs the wait per model call: each
socket read or write of either thread releases the GIL, and taking it back waits for
the other thread to give it up (up to the 5 ms switch interval when that one is busy).
At 250 events/s the worker's two threads made ~3,700 futex calls a second, and half of
the worker's samples were threads waiting in a socket write to get the GIL back
(docs/performance.md).

`SameLoopConsumerThread` is faust's consumer thread with the thread taken out: the
service starts and stops on the main loop like the others, and `call_thread` awaits the
call where it is. aiokafka's fetches, heartbeats and rebalance callbacks become tasks of
the main loop; nothing there holds the loop for long (records go one at a time, the
session records in turns), far below the session timeout that a heartbeat must meet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from faust.transport.drivers import aiokafka as aiokafka_driver
from mode import Service
from mode.utils.futures import maybe_async

from loopwatch.streams.kafka.faust_ext.fetch_wait import adapt_fetch_wait


class SameLoopConsumerThread(aiokafka_driver.AIOKafkaConsumerThread):
    # The thread set `_shutdown` on its way out; with no thread there is nothing to
    # wait for.
    wait_for_shutdown = False

    def __init__(
        self,
        consumer: Any,
        *,
        loop: asyncio.AbstractEventLoop,
        fetch_wait_ms: int = 0,
        **kwargs: Any,
    ) -> None:
        """`fetch_wait_ms`: aiokafka's consumer gets the adaptive fetch wait (`fetch_wait`)."""
        super().__init__(consumer, loop=loop, thread_loop=loop, **kwargs)
        self.fetch_wait_ms = fetch_wait_ms

    async def on_start(self) -> None:
        await super().on_start()  # creates and starts aiokafka's consumer
        adapt_fetch_wait(self._consumer, self.fetch_wait_ms)

    async def start(self) -> None:
        # `ServiceThread.start` starts an OS thread to run the service: run it here.
        self._thread_started.set()
        await Service.start(self)

    async def stop(self) -> None:
        if self._started.is_set():
            await Service.stop(self)

    async def on_stop(self) -> None:
        # What the thread did on its way out (`ServiceThread._shutdown_thread`): stop
        # aiokafka's consumer.
        await self.on_thread_stop()

    # `ServiceThread` leaves these to its thread (no-ops when the parent stops it);
    # without a thread they are the service's own again.
    async def _stop_children(self) -> None:
        await self._default_stop_children()

    async def _stop_futures(self) -> None:
        await self._default_stop_futures()

    async def _stop_exit_stacks(self) -> None:
        await self._default_stop_exit_stacks()

    def _stopped_set(self) -> None:
        self._stopped.set()

    async def call_thread(
        self, fun: Callable[..., Awaitable[Any] | Any], *args: Any, **kwargs: Any
    ) -> Any:
        # Some of the calls faust hands over are plain functions (the method queue
        # accepted both).
        return await maybe_async(fun(*args, **kwargs))

    async def cast_thread(
        self, fun: Callable[..., Awaitable[Any] | Any], *args: Any, **kwargs: Any
    ) -> None:
        self.add_future(maybe_async(fun(*args, **kwargs)))
