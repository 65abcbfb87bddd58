"""Per-agent policies hot-reloaded by a running worker, on the real broker
(docs/contract.md §9.7-§9.8): a new record applies to the next events of every session
of its agent, other agents keep the built-in policy, an invalid record goes to the
dead-letter topic and the previous policy stays."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from loopwatch.models import DEFAULT_KEY, parse_policy
from loopwatch.streams.dead_letters import HEADER_ERROR, HEADER_OFFSET, HEADER_TOPIC
from loopwatch.streams.policy_topic import write_policy
from tests.integration.worker_harness import WorkerEnv, WorkerProcess

pytestmark = pytest.mark.kafka

DEADLINE = 90.0
START = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


class Sessions:
    """Sends one event at a time and waits for its verdict."""

    def __init__(self, env: WorkerEnv, producer: AIOKafkaProducer, verdicts: Any) -> None:
        self.env = env
        self.producer = producer
        self.verdicts = verdicts
        self.seqs: dict[str, int] = {}

    async def triple_call(self, session: str, agent: str) -> dict[str, Any]:
        """An assistant message with three identical calls: `repeated_call_in_turn` in the
        extended profile, nothing in the seed."""
        seq = self.seqs[session] = self.seqs.get(session, -1) + 1
        call = {"name": "get_job_status", "arguments": {"job": 7}}
        event = {
            "type": "assistant_message",
            "session_id": session,
            "agent_id": agent,
            "seq": seq,
            "ts": (START + timedelta(seconds=seq)).isoformat(),
            "tool_calls": [{"id": f"{session}-{seq}-{n}", **call} for n in range(3)],
        }
        await self.producer.send_and_wait(
            self.env.events, json.dumps(event).encode(), key=session.encode()
        )
        return await self.verdict(session, seq)

    async def verdict(self, session: str, seq: int) -> dict[str, Any]:
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            batches = await self.verdicts.getmany(timeout_ms=500)
            for records in batches.values():
                for record in records:
                    verdict: dict[str, Any] = json.loads(record.value)
                    if (verdict["session_id"], verdict["seq"]) == (session, seq):
                        return verdict
        raise AssertionError(f"no verdict for {session}/{seq} within {DEADLINE} s")


@pytest.fixture
async def worker(
    kafka_bootstrap: str, tmp_path: Path
) -> AsyncIterator[tuple[WorkerEnv, Sessions, WorkerProcess]]:
    env = WorkerEnv.unique(kafka_bootstrap, partitions=1)
    await env.create_topics()
    process = WorkerProcess(env, tmp_path)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    verdicts = AIOKafkaConsumer(
        env.verdicts, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await producer.start()
    await verdicts.start()
    try:
        yield env, Sessions(env, producer, verdicts), process
    finally:
        await verdicts.stop()
        await producer.stop()
        process.stop()


async def dead_letters(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    found: list[Any] = []
    try:
        end = time.monotonic() + DEADLINE
        while len(found) < count and time.monotonic() < end:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                found += records
    finally:
        await consumer.stop()
    return found


async def test_a_new_policy_applies_to_the_next_events_and_a_bad_one_changes_nothing(
    worker: tuple[WorkerEnv, Sessions, WorkerProcess], kafka_bootstrap: str
) -> None:
    env, sessions, process = worker
    settings = env.settings()
    # Built-in (seed) policy: no warning, and no `policy` field at all.
    before = await sessions.triple_call("s1", "agent-x")
    assert before["warning"] is None and "policy" not in before, process.log()[-3000:]

    await write_policy(settings, parse_policy("agent-x", b'{"version": 1, "profile": "extended"}'))
    # The worker reads the record asynchronously: every verdict before the switch is the
    # built-in policy's, and the first one after it (and all later) the new policy's.
    end = time.monotonic() + DEADLINE
    verdict = await sessions.triple_call("s1", "agent-x")
    while "policy" not in verdict and time.monotonic() < end:
        assert verdict["warning"] is None
        verdict = await sessions.triple_call("s1", "agent-x")
    assert verdict.get("policy") == {"key": "agent-x", "version": 1}, process.log()[-3000:]
    assert verdict["warning"]["rule"] == "repeated_call_in_turn"
    assert verdict["warning"]["tool_names"] == ["get_job_status"]
    assert verdict["warning"]["count"] == 3

    # Every session of that agent, from its next event; other agents keep the built-in.
    other_session = await sessions.triple_call("s2", "agent-x")
    assert other_session["policy"] == {"key": "agent-x", "version": 1}
    assert other_session["warning"]["rule"] == "repeated_call_in_turn"
    other_agent = await sessions.triple_call("s3", "agent-y")
    assert other_agent["warning"] is None and "policy" not in other_agent

    # An invalid record: dead-lettered with its error; version 1 stays in force.
    bad = b'{"version": 2, "profile": "extended", "call_in_turn_threshold": 0}'
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(env.config, bad, key=b"agent-x")
    finally:
        await producer.stop()
    [letter] = await dead_letters(kafka_bootstrap, env.dlq, 1)
    headers = dict(letter.headers)
    assert (letter.key, letter.value) == (b"agent-x", bad)
    assert headers[HEADER_ERROR] == b"policy"
    assert headers[HEADER_TOPIC].decode() == env.config
    assert int(headers[HEADER_OFFSET]) == 1
    after_bad = await sessions.triple_call("s4", "agent-x")
    assert after_bad["policy"] == {"key": "agent-x", "version": 1}
    assert after_bad["warning"]["rule"] == "repeated_call_in_turn"

    # The fleet default covers the agents without a record of their own.
    fleet = b'{"version": 5, "profile": "extended", "exempt_tools": ["get_job_status"]}'
    await write_policy(settings, parse_policy(DEFAULT_KEY, fleet))
    end = time.monotonic() + DEADLINE
    verdict = await sessions.triple_call("s3", "agent-y")
    while "policy" not in verdict and time.monotonic() < end:
        verdict = await sessions.triple_call("s3", "agent-y")
    assert verdict["policy"] == {"key": "*", "version": 5}
    assert verdict["warning"] is None  # the only tool is exempt
    still_own = await sessions.triple_call("s2", "agent-x")
    assert still_own["policy"] == {"key": "agent-x", "version": 1}
