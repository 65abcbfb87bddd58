"""`streams.kafka.faust_ext.inline`: records of the events topic handed to the worker as the
consumer fetches them, with what faust's stream did for each: skip a record of an earlier
consumer generation or one fetched while the flow is stopped, track it (a rebalance waits
for it), process it, ack it (only then may its offset be committed)."""

from __future__ import annotations

from time import monotonic
from typing import Any

import pytest
from faust.transport.conductor import Conductor
from faust.types import TP, Message

from loopwatch.streams.kafka.faust_ext.app import InboundTimeSensor
from loopwatch.streams.kafka.faust_ext.inline import InlineConductor, inline_callback
from loopwatch.streams.kafka.faust_ext.offset_guard import FlowEvent
from loopwatch.streams.worker.app import create_app
from tests.stream.settings_for_tests import stream_settings

EVENTS = TP("events", 0)


class Consumer:
    """The parts of faust's consumer that the callback touches."""

    def __init__(self) -> None:
        self.suspend_flow = FlowEvent()
        self.fetched_waiting = 0
        self.inline_busy = False
        self.log: list[tuple[str, int]] = []

    def track_message(self, message: Message) -> None:
        self.log.append(("tracked", message.offset))

    def ack(self, message: Message) -> bool:
        self.log.append(("acked", message.offset))
        return True


class FlowControl:
    def __init__(self) -> None:
        self.active = True

    def is_active(self) -> bool:
        return self.active


class Monitor:
    def __init__(self) -> None:
        self.stream_inbound_time: dict[TP, float] = {}


class App:
    def __init__(self) -> None:
        self.monitor = Monitor()
        self.consumer = Consumer()
        self.consumer_generation_id = 3
        self.flow_control = FlowControl()


def record(offset: int, generation: int = 3) -> Message:
    message = Message("events", 0, offset, 0.0, 0, [], b"s", b"{}", None)
    message.generation_id = generation
    return message


def callback(app: App) -> tuple[Any, list[str]]:
    seen: list[str] = []

    async def process(message: Message) -> None:
        seen.append(f"process {message.offset} busy={app.consumer.inline_busy}")
        app.consumer.log.append(("processed", message.offset))

    return inline_callback(app, process), seen


async def test_a_record_is_tracked_processed_and_then_acked() -> None:
    app = App()
    app.consumer.fetched_waiting = 2
    on_record, seen = callback(app)
    await on_record(record(7))
    assert app.consumer.log == [("tracked", 7), ("processed", 7), ("acked", 7)]
    assert seen == ["process 7 busy=True"], "busy while processing"
    assert not app.consumer.inline_busy
    assert app.consumer.fetched_waiting == 1, "one fewer record of the fetch waiting"


@pytest.mark.parametrize("stopped", ["generation", "suspended", "flow_control"])
async def test_a_record_from_before_a_rebalance_is_skipped_unacked(stopped: str) -> None:
    app = App()
    message = record(7, generation=2 if stopped == "generation" else 3)
    if stopped == "suspended":
        app.consumer.suspend_flow.set()
    if stopped == "flow_control":
        app.flow_control.active = False
    on_record, seen = callback(app)
    await on_record(message)
    assert seen == []
    assert app.consumer.log == [], "neither tracked nor acked: read again after the rebalance"


async def test_a_record_whose_processing_fails_stays_unacked_and_the_error_goes_on() -> None:
    app = App()

    async def process(message: Message) -> None:
        raise RuntimeError("the outputs failed")

    with pytest.raises(RuntimeError, match="outputs failed"):
        await inline_callback(app, process)(record(7))
    assert app.consumer.log == [("tracked", 7)], "tracked, never acked: never committed"
    assert not app.consumer.inline_busy


async def test_the_conductor_gives_an_inline_topic_its_callback_and_others_faust_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Topic:
        def __init__(self, name: str) -> None:
            self.name = name

        def get_topic_name(self) -> str:
            return self.name

    conductor = InlineConductor.__new__(InlineConductor)  # no app: only the handler choice
    conductor._inline = {}
    conductor.batch_callbacks = {}
    added: list[str] = []
    conductor.add = lambda topic: added.append(topic.get_topic_name())  # type: ignore[method-assign]

    async def ours(message: Any) -> None: ...

    async def fausts(message: Any) -> None: ...

    monkeypatch.setattr(Conductor, "_build_handler", lambda self, tp, channels: fausts)
    conductor.process_inline(Topic("events"), ours)
    assert added == ["events"], "subscribed"
    assert conductor._build_handler(EVENTS, set()) is ours
    assert conductor._build_handler(TP("sessions-changelog", 0), set()) is fausts
    conductor.process_in_batches(Topic("batched"), ours)
    assert added == ["events", "batched"], "subscribed"
    assert conductor.batch_callbacks == {"batched": ours}
    per_record = conductor._build_handler(TP("batched", 0), set())
    assert per_record is not ours, "never called per record: the consumer hands batches"
    with pytest.raises(RuntimeError, match="per batch"):
        await per_record(Message("batched", 0, 1, 0.0, 0, [], b"s", b"{}", None))


async def test_fetched_records_are_counted_down_as_they_are_handed_over() -> None:
    app = App()
    on_record, _ = callback(app)
    app.consumer.fetched_waiting = 2
    await on_record(record(1))
    assert app.consumer.fetched_waiting == 1
    await on_record(record(2))
    assert app.consumer.fetched_waiting == 0


async def test_each_processed_record_feeds_fausts_stall_check() -> None:
    """faust's livelock detector logs "Stream has not started processing" at ERROR for a
    partition whose backlog is older than `stream_processing_timeout` unless the
    Monitor's `stream_inbound_time` says when the partition last handed an event over."""
    app = App()
    on_record, _ = callback(app)
    before = monotonic()
    await on_record(record(7))
    assert app.monitor.stream_inbound_time[EVENTS] >= before
    skipped = App()
    on_skipped, _ = callback(skipped)
    await on_skipped(record(8, generation=2))
    assert skipped.monitor.stream_inbound_time == {}, "a skipped record is not processing"


async def test_the_app_keeps_the_stall_checks_input_without_fausts_monitor() -> None:
    app = create_app(stream_settings())
    app.on_init_dependencies()
    assert app.monitor not in app.sensors, "faust's Monitor and its per-event statistics"
    (sensor,) = [s for s in app.sensors if isinstance(s, InboundTimeSensor)]
    app.sensors.on_stream_event_in(EVENTS, 5, None, None)  # type: ignore[arg-type]
    assert EVENTS in app.monitor.stream_inbound_time
    assert sensor.inbound_times is app.monitor.stream_inbound_time
