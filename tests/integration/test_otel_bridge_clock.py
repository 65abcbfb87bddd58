"""`loopwatch otel-bridge` on the real broker with a Collector whose clock is off by 600 s,
ahead or behind (docs/contract.md §10.5): the Collector's clock is not the bridge's, so a
correctly stamped session on the same partition is released within its normal window,
and so is the skewed one.

The bridge starts on a backlog whose first record on the partition is a span record, not
a tick (a restart after the bridge re-keyed spans, or a rebalance): the case where the
partition's clock used to start from the Collector's timestamp and, 600 s ahead, held
every session of the partition for 600 s. Every session's events must arrive well before
that (the deadline), and be those of the session published by a runtime."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from loopwatch.streams.otel.mapping import to_record
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.otel.spans import decode_spans
from loopwatch.streams.otel.topics import create_bridge_topics
from tests.integration.worker_harness import WorkerEnv, WorkerProcess, consume
from tests.support.otel_spans import CLEAN, LOOPING, InstrumentedAgent, export_records, raw_session

pytestmark = pytest.mark.kafka

SKEW_MS = 600_000
DEADLINE_SECONDS = 120.0
"""Far below the skew: a partition held by a Collector clock 600 s ahead misses it."""


async def _produce_stamped(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, int]]
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for key, value, timestamp_ms in records:
            await producer.send_and_wait(topic, value, key=key, timestamp_ms=timestamp_ms)
    finally:
        await producer.stop()


def _span_records(values: list[bytes], collector_ms: int) -> list[tuple[bytes | None, bytes]]:
    """The bridge's re-keyed records of exporter records the Collector stamped so."""
    records: list[tuple[bytes | None, bytes]] = []
    for value in values:
        for span in decode_spans(value, "otlp_proto"):
            record = to_record(span, collector_ms)
            if record is not None:
                records.append((record.session_id.encode(), record.encode()))
    return records


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS], ids=["ahead", "behind"])
def test_a_skewed_collector_clock_holds_no_session(
    skew_ms: int, kafka_bootstrap: str, tmp_path: Path
) -> None:
    prefix = f"lw-it-{uuid.uuid4().hex[:10]}"
    env = WorkerEnv(
        kafka_bootstrap,
        prefix,
        partitions=1,  # every session on one partition: one skewed record could hold all
        extra=(
            ("LOOPWATCH_OTEL_APP_ID", f"{prefix}-otel"),
            ("LOOPWATCH_OTEL_TOPIC", f"{prefix}-otlp"),
            ("LOOPWATCH_OTEL_REORDER_WINDOW_MS", "1000"),
        ),
    )
    settings = OtelSettings.from_env(env.env(web_port=6066))
    asyncio.run(create_bridge_topics(settings))
    now_ms = int(time.time() * 1000)
    sessions = {name: f"{name}-{prefix}" for name in ("rekeyed", "skewed", "correct")}
    agents = {name: InstrumentedAgent() for name in sessions}
    turns = {"rekeyed": LOOPING, "skewed": LOOPING, "correct": CLEAN}
    for name, agent in agents.items():
        agent.run(sessions[name], turns[name])
    # The backlog: first span records the bridge had re-keyed before it stopped...
    rekeyed = _span_records(export_records(agents["rekeyed"].spans()), now_ms + skew_ms)
    asyncio.run(
        _produce_stamped(
            kafka_bootstrap, settings.internal_topic, [(k, v, now_ms) for k, v in rekeyed]
        )
    )
    # ...then exporter records, the skewed Collector's and a correct one's.
    exported = [
        (None, value, now_ms + skew_ms) for value in export_records(agents["skewed"].spans())
    ] + [(None, value, now_ms) for value in export_records(agents["correct"].spans())]
    asyncio.run(_produce_stamped(kafka_bootstrap, settings.spans_topic, exported))

    expected = {sessions[name]: len(raw_session(turns[name])) for name in sessions}
    bridge = WorkerProcess(env, tmp_path, name="bridge", command="otel-bridge")
    try:
        records = asyncio.run(
            consume(
                kafka_bootstrap,
                env.events,
                until=sum(expected.values()),
                deadline=DEADLINE_SECONDS,
            )
        )
    finally:
        bridge.stop()
    got: dict[str, int] = {}
    for record in records:
        session = json.loads(record.value)["session_id"]
        got[session] = got.get(session, 0) + 1
    assert got == expected, bridge.log_excerpt()
