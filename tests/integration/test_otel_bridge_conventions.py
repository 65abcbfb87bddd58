"""`loopwatch otel-bridge` on the real broker with an agent instrumented to the GenAI
conventions to the letter (issue 32): conversation and agent ids only on the invoke_agent
and model-call spans, model calls named `generate_content`, one trace per user message.
With `ConversationSpanProcessor` in the agent, the bridge publishes one session per
conversation, with the events a runtime would publish for it."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from loopwatch.streams.otel.conversation import ConversationSpanProcessor
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.otel.topics import create_bridge_topics
from tests.integration.worker_harness import WorkerEnv, WorkerProcess, consume, produce
from tests.support.otel_spans import LOOPING, InstrumentedAgent, export_records, raw_session

pytestmark = pytest.mark.kafka


def test_spans_to_the_letter_give_one_session_per_conversation(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    prefix = f"lw-it-{uuid.uuid4().hex[:10]}"
    env = WorkerEnv(
        kafka_bootstrap,
        prefix,
        extra=(
            ("LOOPWATCH_OTEL_APP_ID", f"{prefix}-otel"),
            ("LOOPWATCH_OTEL_TOPIC", f"{prefix}-otlp"),
            ("LOOPWATCH_OTEL_REORDER_WINDOW_MS", "1000"),
        ),
    )
    settings = OtelSettings.from_env(env.env(web_port=6066))
    asyncio.run(create_bridge_topics(settings))
    conversation = f"conv-{prefix}"
    agent = InstrumentedAgent(
        strict=True, operation="generate_content", processors=(ConversationSpanProcessor(),)
    )
    for first in range(0, len(LOOPING), 3):  # three traces, one per user message
        agent.run(conversation, LOOPING[first : first + 3])
    records = [(None, value) for value in export_records(agent.spans(), batch=3, shuffle=4)]
    asyncio.run(produce(kafka_bootstrap, settings.spans_topic, records))
    expected = raw_session(LOOPING, session_id=conversation)
    bridge = WorkerProcess(env, tmp_path, name="bridge", command="otel-bridge")
    try:
        published = asyncio.run(consume(kafka_bootstrap, env.events, until=len(expected)))
    finally:
        bridge.stop()
    events = [json.loads(record.value) for record in published]
    assert {event["session_id"] for event in events} == {conversation}, bridge.log_excerpt()
    assert {event["agent_id"] for event in events} == {"coder"}
    assert [event["type"] for event in events] == [event.type for event in expected]
