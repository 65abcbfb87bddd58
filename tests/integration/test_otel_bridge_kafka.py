"""`loopwatch otel-bridge` and `loopwatch worker` on the real broker: exporter records made
from SDK spans by OpenTelemetry's OTLP encoder, out of order and keyed as the Collector
keys them; the looping agent gets its warnings on `loop-warnings`, the clean one none; a
record that is no OTLP request is a dead letter; a restart with every record delivered
again publishes no event twice."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from loopwatch.models import decode_event
from loopwatch.streams.kafka.dead_letters import HEADER_ERROR, HEADER_TOPIC
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.otel.topics import create_bridge_topics
from tests.integration.worker_harness import (
    REPO_ROOT,
    WorkerEnv,
    WorkerProcess,
    consume,
    produce,
    verdict_key,
)
from tests.support.otel_spans import (
    CLEAN,
    LOOPING,
    InstrumentedAgent,
    export_records,
    raw_session,
    rules,
)

pytestmark = pytest.mark.kafka

NOT_OTLP = b"\x00\x01 not an OTLP request"


@dataclass
class Run:
    loop_session: str
    clean_session: str
    spans: int
    """GenAI spans (chat and execute_tool) in the exporter records."""
    records: list[tuple[bytes | None, bytes | None]]
    verdicts: list[Any]
    warnings: list[Any]
    dead_letters: list[Any]
    events: list[Any]
    after_replay: list[Any]
    stale_after_replay: float
    example: subprocess.CompletedProcess[str]
    logs: str


def _records(encoding: str, loop_session: str, clean_session: str) -> tuple[list[Any], int]:
    looping = InstrumentedAgent(style="child")
    looping.run(loop_session, LOOPING)
    clean = InstrumentedAgent()
    clean.run(clean_session, CLEAN)
    records: list[tuple[bytes | None, bytes | None]] = []
    # Batches out of order; the looping agent's keyed by trace id (partition_traces_by_id),
    # the clean one's without a key (the exporter's default).
    trace = f"{looping.spans()[0].context.trace_id:032x}".encode()
    loop_values = export_records(looping.spans(), encoding, batch=2, shuffle=5)
    clean_values = export_records(clean.spans(), encoding, batch=4, shuffle=6)
    for index in range(max(len(loop_values), len(clean_values))):
        records += [(trace, v) for v in loop_values[index : index + 1]]
        records += [(None, v) for v in clean_values[index : index + 1]]
        if index == 1:
            records.append((None, NOT_OTLP))
    genai = [s for s in looping.spans() + clean.spans() if not s.name.startswith("invoke_agent")]
    return records, len(genai)


async def _read_to_end(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every record of `topic` up to its end offsets now."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    records: list[Any] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        remaining = {tp for tp, end in ends.items() if end > 0}
        while remaining:
            for tp, batch in (await consumer.getmany(*remaining, timeout_ms=500)).items():
                records.extend(batch)
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
    finally:
        await consumer.stop()
    return records


def _run_example(
    bootstrap: str, settings: OtelSettings, warnings_topic: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "examples" / "otel_agent_loop.py"),
            *("--bootstrap", bootstrap, "--topic", settings.spans_topic),
            *("--encoding", settings.encoding, "--warnings-topic", warnings_topic),
            *("--wait", "90"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as page:
        lines = dict(line.rsplit(" ", 1) for line in page.read().decode().splitlines() if line)
    return float(lines.get(name, "0"))


def _wait_for_metric(bridge: WorkerProcess, name: str, at_least: float, deadline: float) -> float:
    end = time.monotonic() + deadline
    value = -1.0
    while time.monotonic() < end and bridge.proc.poll() is None:
        try:
            value = _metric(bridge.web_port, name)
        except OSError:
            value = -1.0  # not serving yet
        if value >= at_least:
            return value
        time.sleep(0.2)  # polling interval inside a deadline, not synchronisation
    return value


@pytest.fixture(scope="module", params=["otlp_proto", "otlp_json"])
def run(
    request: pytest.FixtureRequest, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    encoding = request.param
    prefix = f"lw-it-{uuid.uuid4().hex[:10]}"
    env = WorkerEnv(
        kafka_bootstrap,
        prefix,
        extra=(
            ("LOOPWATCH_OTEL_APP_ID", f"{prefix}-otel"),
            ("LOOPWATCH_OTEL_TOPIC", f"{prefix}-otlp"),
            ("LOOPWATCH_OTEL_ENCODING", encoding),
            ("LOOPWATCH_OTEL_REORDER_WINDOW_MS", "1000"),
        ),
    )
    settings = OtelSettings.from_env(env.env(web_port=6066))
    asyncio.run(create_bridge_topics(settings))
    loop_session, clean_session = f"loop-{prefix}", f"clean-{prefix}"
    records, spans = _records(encoding, loop_session, clean_session)
    expected = len(raw_session(LOOPING)) + len(raw_session(CLEAN))
    expected_warnings = sum(1 for rule in rules(raw_session(LOOPING)) if rule)
    logs = tmp_path_factory.mktemp("otel")
    worker = WorkerProcess(env, logs, name="worker")
    bridge = WorkerProcess(env, logs, name="bridge", command="otel-bridge")
    try:
        asyncio.run(produce(kafka_bootstrap, settings.spans_topic, records))
        verdicts = asyncio.run(
            consume(kafka_bootstrap, env.verdicts, until=expected, distinct=verdict_key)
        )
        warnings = asyncio.run(consume(kafka_bootstrap, env.warnings, until=expected_warnings))
        dead = asyncio.run(consume(kafka_bootstrap, env.dlq, until=1))
        events = asyncio.run(_read_to_end(kafka_bootstrap, env.events, env.partitions))
        example = _run_example(kafka_bootstrap, settings, env.warnings)
        bridge.stop()
        # A restart, and the exporter delivers every record again (at-least-once input).
        asyncio.run(produce(kafka_bootstrap, settings.spans_topic, records))
        bridge = WorkerProcess(env, logs, name="bridge-again", command="otel-bridge")
        stale = _wait_for_metric(bridge, "loopwatch_otel_spans_stale_total", spans, 90.0)
        after_replay = asyncio.run(_read_to_end(kafka_bootstrap, env.events, env.partitions))
    finally:
        bridge.stop()
        worker.stop()
    yield Run(
        loop_session,
        clean_session,
        spans,
        records,
        verdicts,
        warnings,
        dead,
        events,
        after_replay,
        stale,
        example,
        "\n".join(path.read_text(errors="replace")[-3000:] for path in logs.glob("*.log")),
    )


def test_the_looping_agent_gets_its_warnings_and_the_clean_one_none(run: Run) -> None:
    expected_rules = [rule for rule in rules(raw_session(LOOPING)) if rule]
    got = [json.loads(r.value) for r in run.warnings]
    assert {v["session_id"] for v in got} == {run.loop_session}, run.logs
    assert [v["warning"]["rule"] for v in sorted(got, key=lambda v: v["seq"])] == expected_rules


def test_every_event_got_its_verdict(run: Run) -> None:
    keys = {verdict_key(r) for r in run.verdicts}
    by_session: dict[str, int] = defaultdict(int)
    for session_id, _seq in keys:
        by_session[session_id] += 1
    assert by_session == {
        run.loop_session: len(raw_session(LOOPING)),
        run.clean_session: len(raw_session(CLEAN)),
    }, run.logs


def test_events_are_keyed_by_session_in_seq_order(run: Run) -> None:
    seqs: dict[str, list[int]] = defaultdict(list)
    for record in sorted(run.events, key=lambda r: (r.partition, r.offset)):
        event = decode_event(record.value)
        assert record.key == event.session_id.encode()
        seqs[event.session_id].append(event.seq)
    assert all(s == sorted(set(s)) for s in seqs.values())
    assert sum(len(s) for s in seqs.values()) == len(run.verdicts)


def test_a_record_that_is_no_otlp_request_is_a_dead_letter(run: Run) -> None:
    [letter] = run.dead_letters
    assert letter.value == NOT_OTLP
    assert dict(letter.headers)[HEADER_ERROR] == b"not_otlp"
    assert dict(letter.headers)[HEADER_TOPIC].decode().endswith("-otlp")


def test_a_restart_with_every_record_again_emits_no_event_twice(run: Run) -> None:
    assert run.stale_after_replay >= run.spans, run.logs
    sessions = {run.loop_session.encode(), run.clean_session.encode()}

    def ours(records: list[Any]) -> list[bytes]:
        return sorted(r.value for r in records if r.key in sessions)

    assert ours(run.events) and ours(run.after_replay) == ours(run.events)


def test_the_example_agent_loop_is_warned_through_the_bridge(run: Run) -> None:
    assert run.example.returncode == 0, run.example.stdout + run.example.stderr + run.logs
    assert "the looping agent was warned" in run.example.stdout
