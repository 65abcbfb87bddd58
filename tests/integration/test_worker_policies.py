"""Per-agent policies hot-reloaded by a running worker, on the real broker
(docs/contract.md §9.7-§9.8): a new record applies to the next events of every session
of its agent, other agents keep the built-in policy, an invalid record goes to the
dead-letter topic and the previous policy stays."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from loopwatch.models import DEFAULT_KEY, parse_policy
from loopwatch.streams.demo.ports import free_ports
from loopwatch.streams.kafka.dead_letters import HEADER_ERROR, HEADER_OFFSET, HEADER_TOPIC
from loopwatch.streams.worker.policy_follower import dead_letter_group, write_policy
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

    async def until_judged_by(
        self, session: str, agent: str, policy: dict[str, Any] | None, before: dict[str, Any]
    ) -> dict[str, Any]:
        """Triple calls until a verdict names `policy` (None: no `policy` field, the
        built-in policy); every verdict before it must name `before`'s policy and give
        `before`'s warning (the worker applies a record to the events after it read it)."""
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            verdict = await self.triple_call(session, agent)
            if verdict.get("policy") == policy:
                return verdict
            assert verdict.get("policy") == before.get("policy"), verdict
            assert verdict["warning"] == before["warning"], verdict
        raise AssertionError(f"no verdict judged by {policy} within {DEADLINE} s")

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


async def policy_command(env: WorkerEnv, *args: str) -> tuple[int, str]:
    """`loopwatch policy ARGS` as an operator runs it: (exit code, stdout + stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "loopwatch.streams.cli",
        "policy",
        *args,
        env=env.env(web_port=free_ports()),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_a_deleted_policy_falls_back_to_the_default_then_to_the_settings(
    worker: tuple[WorkerEnv, Sessions, WorkerProcess],
) -> None:
    env, sessions, process = worker
    settings = env.settings()
    builtin = await sessions.triple_call("s1", "agent-x")
    assert builtin["warning"] is None and "policy" not in builtin, process.log()[-3000:]
    # The agent's own record first: its events never meet the default alone.
    await write_policy(settings, parse_policy("agent-x", b'{"version": 3, "profile": "extended"}'))
    # The fleet default: extended too, but 4 identical calls in a turn before a warning.
    fleet = b'{"version": 7, "profile": "extended", "call_in_turn_threshold": 4}'
    await write_policy(settings, parse_policy(DEFAULT_KEY, fleet))
    own = await sessions.until_judged_by("s1", "agent-x", {"key": "agent-x", "version": 3}, builtin)
    assert own["warning"]["rule"] == "repeated_call_in_turn", own

    code, output = await policy_command(env, "delete", "agent-x")
    assert (code, output.strip()) == (0, "deleted agent-x (was version 3)"), output
    # The agent's next events: the fleet default (3 identical calls stay under its 4).
    default = await sessions.until_judged_by("s1", "agent-x", {"key": "*", "version": 7}, own)
    assert default["warning"] is None
    assert await policy_command(env, "list") == (0, "*\t7\textended\n")
    code, output = await policy_command(env, "get", "agent-x")
    assert code == 3 and "no policy for 'agent-x'" in output
    code, output = await policy_command(env, "delete", "agent-x")  # nothing left to delete
    assert code == 3 and "no policy for 'agent-x'" in output

    code, output = await policy_command(env, "delete", "*")
    assert (code, output.strip()) == (0, "deleted * (was version 7)"), output
    # Without a default: the worker's settings (the seed profile), and no `policy` field.
    settings_policy = await sessions.until_judged_by("s1", "agent-x", None, default)
    assert settings_policy["warning"] is None
    assert await policy_command(env, "list") == (0, "")


async def committed_dead_letter_offset(env: WorkerEnv) -> int | None:
    """How far dead-lettering of the policy topic got (the group's committed offset)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=env.bootstrap,
        group_id=dead_letter_group(env.settings()),
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        offset: int | None = await consumer.committed(TopicPartition(env.config, 0))
        return offset
    finally:
        await consumer.stop()


async def letters_up_to(bootstrap: str, topic: str, source_offset: int) -> list[int]:
    """The source offsets of the policy dead letters, read until the one of
    `source_offset` (one worker dead-letters in offset order: any copy of an earlier
    record comes before it)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    found: list[int] = []
    try:
        end = time.monotonic() + DEADLINE
        while source_offset not in found and time.monotonic() < end:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                found += [int(dict(record.headers)[HEADER_OFFSET]) for record in records]
    finally:
        await consumer.stop()
    return found


async def test_an_invalid_record_is_dead_lettered_once_across_worker_starts(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = WorkerEnv.unique(kafka_bootstrap, partitions=1)
    await env.create_topics()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(env.config, b'{"version": 1, "threshold": 0}', key=b"a")
        first = WorkerProcess(env, tmp_path, name="first")
        try:
            assert await letters_up_to(kafka_bootstrap, env.dlq, 0) == [0], first.log()[-3000:]
            # The holder commits right after the dead letter is acknowledged; stopping
            # before that would be the documented crash case (a second copy).
            end = time.monotonic() + DEADLINE
            while await committed_dead_letter_offset(env) != 1:
                assert time.monotonic() < end, first.log()[-3000:]
        finally:
            assert first.stop() == 0, first.log()[-3000:]

        second = WorkerProcess(env, tmp_path, name="second")
        try:
            # A second invalid record: once its dead letter is there, the second start
            # has read past the first record, and did not dead-letter it again.
            await producer.send_and_wait(env.config, b'{"version": 0}', key=b"b")
            letters = await letters_up_to(kafka_bootstrap, env.dlq, 1)
            assert letters == [0, 1], second.log()[-3000:]
            assert "dead letter policy at" in second.log()
        finally:
            second.stop()
    finally:
        await producer.stop()


async def dead_letter_group_members(env: WorkerEnv) -> tuple[str, int]:
    """(state, members) of the fleet's dead-lettering group."""
    admin = AIOKafkaAdminClient(bootstrap_servers=env.bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_consumer_groups([dead_letter_group(env.settings())])
        group = response.groups[0]
        return str(group[2]), len(group[5])
    finally:
        await admin.close()


async def test_two_running_workers_dead_letter_an_invalid_record_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = WorkerEnv.unique(kafka_bootstrap, partitions=1)
    await env.create_topics()
    workers = [WorkerProcess(env, tmp_path, name=f"worker-{n}") for n in (1, 2)]

    def logs() -> str:
        return "\n".join(worker.log()[-2000:] for worker in workers)

    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        # Both workers in the group, its partition assigned: no hand-over to come.
        end = time.monotonic() + DEADLINE
        while await dead_letter_group_members(env) != ("Stable", 2):
            assert time.monotonic() < end, logs()
        await producer.send_and_wait(env.config, b'{"version": 1, "rules": {"x": 1}}', key=b"a")
        await producer.send_and_wait(env.config, b"not json", key=b"b")
        assert await letters_up_to(kafka_bootstrap, env.dlq, 1) == [0, 1], logs()
        # One of them dead-lettered both; each folds both (and logs them) in its own time.
        assert sum(worker.log().count("dead letter policy at") for worker in workers) == 2
        end = time.monotonic() + DEADLINE
        while any(w.log().count("invalid policy record at offset") < 2 for w in workers):
            assert time.monotonic() < end, logs()
            await asyncio.sleep(0.1)  # polling a log file against a deadline
    finally:
        await producer.stop()
        for worker in workers:
            worker.stop()
