"""`InlineHandOff.wait_first`: faust's per-record hand-off, run inline when it can be.

The consumer's fetch loop calls `wait_first(callback(message), suspend_flow.wait())`;
these tests make the same call on a bare service and check it behaves as mode's version:
the hand-off's result, waiting, interruption by a suspended flow, and errors.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loopwatch.streams.kafka.faust_ext.offset_guard import FlowEvent, InlineHandOff


class _Consumer(InlineHandOff):
    def __init__(self) -> None:
        super().__init__()
        self.suspend_flow = FlowEvent()


async def test_a_hand_off_that_never_waits_runs_inline() -> None:
    consumer = _Consumer()
    ran_in: list[asyncio.Task[Any] | None] = []

    async def hand_off() -> str:
        ran_in.append(asyncio.current_task())
        return "delivered"

    results = await consumer.wait_first(hand_off(), consumer.suspend_flow.wait())
    assert results.results == ["delivered"]
    assert not results.stopped
    assert ran_in == [asyncio.current_task()], "inline: no task of its own"


async def test_a_hand_off_that_waits_is_resumed_and_returns_its_result() -> None:
    consumer = _Consumer()
    room = asyncio.get_running_loop().create_future()
    steps: list[str] = []
    started = asyncio.Event()

    async def hand_off() -> str:
        steps.append("waiting")
        started.set()
        value = await room
        steps.append(f"got {value}")
        await asyncio.sleep(0)  # a second suspension, after the resume
        return "delivered"

    waiting = asyncio.ensure_future(consumer.wait_first(hand_off(), consumer.suspend_flow.wait()))
    await asyncio.wait_for(started.wait(), timeout=5)
    assert steps == ["waiting"]
    assert not waiting.done()
    room.set_result("room")
    results = await asyncio.wait_for(waiting, timeout=5)
    assert steps == ["waiting", "got room"]
    assert results.results == ["delivered"]


async def test_a_suspended_flow_interrupts_a_waiting_hand_off_and_cancels_it() -> None:
    consumer = _Consumer()
    never = asyncio.get_running_loop().create_future()
    cancelled = asyncio.Event()
    started = asyncio.Event()

    async def hand_off() -> None:
        started.set()
        try:
            await never
        except asyncio.CancelledError:
            cancelled.set()
            raise

    waiting = asyncio.ensure_future(consumer.wait_first(hand_off(), consumer.suspend_flow.wait()))
    await asyncio.wait_for(started.wait(), timeout=5)
    consumer.suspend_flow.set()
    results = await asyncio.wait_for(waiting, timeout=5)
    assert results.results == [True], "the suspended flow won"
    await asyncio.wait_for(cancelled.wait(), timeout=5)
    assert never.cancelled(), "cancelled as a task awaiting it would be"


async def test_an_error_before_waiting_propagates() -> None:
    consumer = _Consumer()

    async def hand_off() -> None:
        raise LookupError("no channel for this partition")

    with pytest.raises(LookupError, match="no channel"):
        await consumer.wait_first(hand_off(), consumer.suspend_flow.wait())


async def test_an_error_after_waiting_propagates() -> None:
    consumer = _Consumer()
    room = asyncio.get_running_loop().create_future()
    started = asyncio.Event()

    async def hand_off() -> None:
        started.set()
        await room
        raise LookupError("decode failed")

    waiting = asyncio.ensure_future(consumer.wait_first(hand_off(), consumer.suspend_flow.wait()))
    await asyncio.wait_for(started.wait(), timeout=5)
    room.set_result(None)
    with pytest.raises(LookupError, match="decode failed"):
        await asyncio.wait_for(waiting, timeout=5)


async def test_with_the_flow_already_suspended_mode_runs_it_as_before() -> None:
    consumer = _Consumer()
    consumer.suspend_flow.set()
    ran_in: list[asyncio.Task[Any] | None] = []

    async def hand_off() -> str:
        ran_in.append(asyncio.current_task())
        return "delivered"

    results = await consumer.wait_first(hand_off(), consumer.suspend_flow.wait())
    assert results.done  # one of the two finished first
    if ran_in:
        assert ran_in != [asyncio.current_task()], "not inline: in a task of mode's"


async def test_a_flow_suspended_and_resumed_before_a_wait_does_not_interrupt_it() -> None:
    consumer = _Consumer()
    consumer.suspend_flow.set()
    consumer.suspend_flow.clear()  # a rebalance came and went
    room = asyncio.get_running_loop().create_future()
    started = asyncio.Event()

    async def hand_off() -> str:
        started.set()
        await room
        return "delivered"

    waiting = asyncio.ensure_future(consumer.wait_first(hand_off(), consumer.suspend_flow.wait()))
    await asyncio.wait_for(started.wait(), timeout=5)
    room.set_result(None)
    results = await asyncio.wait_for(waiting, timeout=5)
    assert results.results == ["delivered"]


async def test_cancelling_the_fetch_loop_cancels_a_waiting_hand_off() -> None:
    consumer = _Consumer()
    cancelled = asyncio.Event()
    started = asyncio.Event()

    async def hand_off() -> None:
        started.set()
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    waiting = asyncio.ensure_future(consumer.wait_first(hand_off(), consumer.suspend_flow.wait()))
    await asyncio.wait_for(started.wait(), timeout=5)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await asyncio.wait_for(cancelled.wait(), timeout=5)


async def test_a_plain_event_as_the_flow_goes_to_mode() -> None:
    consumer = _Consumer()
    consumer.suspend_flow = asyncio.Event()
    ran_in: list[asyncio.Task[Any] | None] = []

    async def hand_off() -> str:
        ran_in.append(asyncio.current_task())
        return "delivered"

    results = await consumer.wait_first(hand_off(), consumer.suspend_flow.wait())
    assert results.results == ["delivered"]
    assert ran_in and ran_in != [asyncio.current_task()], "in a task of mode's"


async def test_other_calls_go_to_mode_unchanged() -> None:
    consumer = _Consumer()
    never = asyncio.Event()  # an Event, not its wait(): not the record hand-off

    async def work() -> int:
        return 7

    results = await consumer.wait_first(work(), never)
    assert results.results == [7]


async def test_a_record_processed_inline_is_finished_even_if_the_flow_stops_meanwhile() -> None:
    # An event half sent (its verdict queued, its warning not) must never be cut short:
    # the same process would later take the event's replay for one already sent.
    consumer = _Consumer()
    room = asyncio.get_running_loop().create_future()
    started = asyncio.Event()
    steps: list[str] = []

    async def hand_off() -> str:
        consumer.inline_busy = True
        try:
            steps.append("verdict queued")
            started.set()
            await room  # waiting for room for its records
            steps.append("warning queued")
        finally:
            consumer.inline_busy = False
        return "processed"

    waiting = asyncio.ensure_future(consumer.wait_first(hand_off(), consumer.suspend_flow.wait()))
    await asyncio.wait_for(started.wait(), timeout=5)
    consumer.suspend_flow.set()  # a rebalance begins
    await asyncio.sleep(0)  # give the flow's waiter its turn: it must not win
    assert not waiting.done()
    room.set_result(None)
    results = await asyncio.wait_for(waiting, timeout=5)
    assert results.results == ["processed"]
    assert steps == ["verdict queued", "warning queued"]
