"""Records of a topic processed as the consumer hands them over, without a faust stream.

faust hands each fetched record to a conductor callback, which decodes it into an
`Event`, puts it on the agent's stream buffer and, under a backlog (the buffer full),
waits in a task of its own; the agent's stream then takes it off again, tracks it, sets
it as the current event, runs the sensors and acks it on the next iteration. For the
events topic all of that is per-record overhead around work that needs only the record
(key, value, partition, offset, timestamp): about a fifth of the worker's CPU
(docs/performance.md). `InlineConductor` gives such a topic a callback of its own, which
the consumer's fetch loop awaits directly for each record (`InlineHandOff` runs it inline:
no task, no queue), keeping everything else of faust: group membership, assignment,
changelog recovery, read offsets, gaps, flow control, commits of acked offsets.

What the stream did for each record, `inline_callback` does in the same order: skip a
record of an earlier consumer generation or fetched while the flow is stopped (a
rebalance; it is read again from the committed offset afterwards), track it (so that a
rebalance waits for it, `Consumer.wait_empty`), process it, ack it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from time import monotonic
from typing import Any

from faust.transport.conductor import Conductor

RecordCallback = Callable[[Any], Awaitable[None]]


class InlineConductor(Conductor):
    """faust's conductor, with callbacks of our own for the topics given to `process_inline`
    (their records reach no channel)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._inline: dict[str, RecordCallback] = {}
        self.batch_callbacks: dict[str, Any] = {}
        """Topic name -> callback of the topics handed over per batch (`batch_hand_off`)."""

    def process_inline(self, topic: Any, callback: RecordCallback) -> None:
        """Subscribe to `topic` (a faust topic, acks enabled) and hand each of its records
        to `callback(message)` (a faust `Message`) instead of a stream."""
        self._inline[topic.get_topic_name()] = callback
        self.add(topic)

    def process_in_batches(self, topic: Any, callback: Any) -> None:
        """Subscribe to `topic` (acks enabled) and hand its records to `callback` a fetched
        batch per partition at a time (`batch_hand_off.BatchCallback`), by the consumer's
        fetch loop (`batch_hand_off.BatchHandOff`)."""
        self.batch_callbacks[topic.get_topic_name()] = callback
        self.add(topic)

    def _build_handler(self, tp: Any, channels: Any) -> Any:
        if tp.topic in self.batch_callbacks:
            return _never_per_record
        callback = self._inline.get(tp.topic)
        if callback is not None:
            return callback
        return super()._build_handler(tp, channels)


async def _never_per_record(message: Any) -> None:
    raise RuntimeError(
        f"{message.topic} is handed over per batch: a consumer without `BatchHandOff`?"
    )


def inline_callback(app: Any, process: RecordCallback) -> RecordCallback:
    """The callback for `InlineConductor.process_inline`: `process(message)` for each
    record, with the tracking, acking and skipping of a faust stream (module docstring).
    A record whose `process` raises stays unacked and the exception goes on to the
    consumer's fetch loop (the worker stops; a restart reads the record again)."""

    # faust's stall check reads when each partition last handed an event over (see
    # `LoopwatchApp.on_init_dependencies`)
    inbound_times: dict[Any, float] = app.monitor.stream_inbound_time

    async def on_record(message: Any) -> None:
        consumer = app.consumer
        consumer.fetched_waiting -= 1
        if (
            message.generation_id != app.consumer_generation_id
            or consumer.suspend_flow.is_set()
            or not app.flow_control.is_active()
        ):
            return  # as faust's stream drops it: not processed, not acked
        message.tracked = True
        consumer.track_message(message)
        inbound_times[message.tp] = monotonic()
        consumer.inline_busy = True
        try:
            await process(message)
        finally:
            consumer.inline_busy = False
        consumer.ack(message)

    return on_record
