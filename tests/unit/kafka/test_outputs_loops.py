"""The adaptive linger on any event loop, not only asyncio's own.

A loop's handles need not be asyncio's classes: uvloop's `call_later` returns no
`asyncio.TimerHandle`. The outputs once told the linger from an end-of-turn drain by
that class, so under uvloop records that found the input empty still waited for the
linger (the closed-loop wait's median rose by ~5 ms). No broker: the fake producer of
`test_outputs_flush` hands out a future per batch that the test acknowledges.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import uvloop

from loopwatch.streams.kafka.batched_outputs import BatchedOutputs
from tests.unit.kafka.test_outputs_flush import LONG_LINGER, FakeProducer, settle

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


async def records_that_find_the_input_empty_go_at_once() -> None:
    producer = FakeProducer()
    queued = False
    outputs = BatchedOutputs(
        lambda: producer,
        on_failure=lambda exc: None,
        linger=LONG_LINGER,
        send_when_idle=True,
        input_waiting=lambda: queued,
    )
    await outputs.send("t", b"k0", b"alone")
    await settle()
    assert len(producer.submitted) == 1  # idle: sent at the end of the turn, in flight

    queued = True  # a backlog: these wait for the linger (an hour) or the input's end
    for i in range(1, 4):
        await outputs.send("t", b"k%d" % i, b"v")
    producer.submitted[0].ack()
    await settle()
    assert len(producer.submitted) == 1
    assert outputs.waiting == 3

    queued = False  # the next event is the last one queued: everything goes now
    await outputs.send("t", b"k4", b"v")
    await settle()
    assert outputs.waiting == 0
    assert [batch.keys for batch in producer.submitted] == [
        [b"k0"],
        [b"k1", b"k2", b"k3", b"k4"],
    ]


@pytest.mark.parametrize("new_loop", LOOPS.values(), ids=LOOPS.keys())
def test_records_that_find_the_input_empty_go_without_the_linger(
    new_loop: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(asyncio.wait_for(records_that_find_the_input_empty_go_at_once(), 30))
