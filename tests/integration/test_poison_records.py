"""Poison records on the real broker: a record that once crashed the stream agent (a lone
surrogate in a valid-JSON event) lands in the dead-letter topic, and the next event of the
same partition gets its verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwatch.streams.kafka.dead_letters import HEADER_ERROR, HEADER_REASON
from tests.integration.worker_harness import (
    WorkerEnv,
    WorkerProcess,
    consume,
    event_records,
    produce,
    verdict_key,
)
from tests.support.builders import SessionBuilder

pytestmark = pytest.mark.kafka

POISON = [
    # valid JSON, valid UTF-8: the escape decodes to a lone surrogate
    b'{"type":"user_message","session_id":"poison","seq":0,"ts":"2026-12-03T12:00:00Z",'
    b'"agent_id":"ag\\ud800"}',
    b'{"type":"assistant_message","session_id":"poison","seq":1,"ts":"2026-12-03T12:00:00Z",'
    b'"tool_calls":[{"id":"c","name":"t","arguments":{"q":["\\udfff"]}}]}',
    b'{"type":"user_message","session_id":"poison","seq":2,"ts":"2026-12-03T12:00:00Z","text":NaN}',
]


async def test_a_surrogate_record_is_a_dead_letter_and_the_partition_goes_on(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = WorkerEnv.unique(kafka_bootstrap, partitions=1)  # one partition: "the same" one
    await env.create_topics()
    after = SessionBuilder("after-poison")
    worker = WorkerProcess(env, tmp_path)
    try:
        await produce(kafka_bootstrap, env.events, [(b"poison", value) for value in POISON])
        await produce(kafka_bootstrap, env.events, event_records([after.user(), after.user()]))
        verdicts = await consume(kafka_bootstrap, env.verdicts, until=2, distinct=verdict_key)
        dead = await consume(kafka_bootstrap, env.dlq, until=len(POISON))
        status, ready = worker.get("/ready")
    finally:
        worker.stop()
    log = worker.log()
    assert {verdict_key(r) for r in verdicts} == {("after-poison", 0), ("after-poison", 1)}, log[
        -3000:
    ]
    assert [r.value for r in dead] == POISON  # the original bytes, in order
    kinds = [dict(r.headers)[HEADER_ERROR] for r in dead]
    assert kinds == [b"schema", b"schema", b"not_json"]
    reasons = [dict(r.headers)[HEADER_REASON].decode() for r in dead]
    assert reasons[0] == "agent_id: string is not valid Unicode (lone surrogate)"
    assert reasons[1] == "tool_calls.0.arguments: string is not valid Unicode (lone surrogate)"
    assert status == 200 and ready["processing_crashes"] == 0, ready
    assert "Traceback" not in log
    assert all(json.loads(r.value)["warning"] is None for r in verdicts)
