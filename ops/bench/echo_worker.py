"""A bare aiokafka echo worker: the floor under the client's wait (`client_wait_bench.py`).

    .venv/bin/python ops/bench/echo_worker.py BOOTSTRAP EVENTS_TOPIC VERDICTS_TOPIC GROUP

No faust, no detection, no state: one consumer (aiokafka's defaults, in a group of its
own) reads the events topic and answers each event with a fixed verdict (no warning)
naming its session and seq, sent with aiokafka's producer (its defaults: no linger) to the
verdicts partition the event's reply header names, by key without one, as the worker
does. What the client waits for through it is the broker's and the clients' share of
the wait: two produce and two fetch round trips, and a decode of each record. Prints
"ready" once it holds partitions; runs until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import ConsumerRebalanceListener

REPLY_HEADER = "loopwatch-reply-partition"  # docs/contract.md §5.1


class _Ready(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.assigned = asyncio.Event()

    async def on_partitions_revoked(self, revoked: Any) -> None:
        return None

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if assigned:
            self.assigned.set()


def verdict(event: dict[str, Any]) -> bytes:
    """The fixed verdict for `event`: no warning, evaluated now."""
    return json.dumps(
        {
            "v": 1,
            "type": "loop_verdict",
            "session_id": event["session_id"],
            "seq": event["seq"],
            "agent_id": event.get("agent_id"),
            "event_ts": event["ts"],
            "evaluated_at": datetime.now(UTC).isoformat(),
            "warning": None,
        },
        separators=(",", ":"),
    ).encode()


def reply_partition(headers: Any) -> int | None:
    for name, value in headers or ():
        if name == REPLY_HEADER and value:
            return int(value)
    return None


async def echo(bootstrap: str, events: str, verdicts: str, group: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="latest"
    )
    ready = _Ready()
    await producer.start()
    await consumer.start()
    consumer.subscribe([events], listener=ready)
    waiting = asyncio.ensure_future(ready.assigned.wait())
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=500)
            if waiting is not None and waiting.done():
                print("ready", flush=True)
                waiting = None
            for records in batches.values():
                for record in records:
                    event = json.loads(record.value)
                    await producer.send(
                        verdicts,
                        verdict(event),
                        key=record.key,
                        partition=reply_partition(record.headers),
                    )
    finally:
        await consumer.stop()
        await producer.stop()


def main() -> None:
    bootstrap, events, verdicts, group = sys.argv[1:5]
    asyncio.run(echo(bootstrap, events, verdicts, group))


if __name__ == "__main__":
    main()
