"""Reply partitions on the real broker (docs/contract.md §5.1): two runtime clients with
disjoint claims each receive only their own sessions' verdicts; events without the
header (old clients) still get theirs by key; a bad header is routed by key."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from loopwatch.models import REPLY_PARTITION_HEADER, reply_header
from loopwatch.streams.client import LoopwatchClient
from loopwatch.streams.client.reader import partition_for
from tests.integration.worker_harness import WorkerEnv, WorkerProcess

pytestmark = pytest.mark.kafka

PARTITIONS = 4
TIMEOUT = 120.0  # a wait returns on its verdict; this only bounds a broken run


@pytest.fixture(scope="module")
def worker_env(kafka_bootstrap: str) -> WorkerEnv:
    return WorkerEnv.unique(kafka_bootstrap, extra=(("LOOPWATCH_VERDICT_PARTITIONS", "4"),))


@pytest.fixture(scope="module")
def worker(worker_env: WorkerEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    asyncio.run(worker_env.create_topics())
    process = WorkerProcess(worker_env, Path(tmp_path_factory.mktemp("reply")))
    try:
        yield
    finally:
        process.stop()


async def _disjoint_claims(*clients: LoopwatchClient) -> list[set[int]]:
    """Wait until the group has given every client a claim of its own, and reads only it."""
    for client in clients:
        assert await client.connect(TIMEOUT)  # the client connects in the background
    while True:
        changed = [asyncio.ensure_future(c.reader.reassigned()) for c in clients]
        claims = [c.reader.claimed_partitions or set() for c in clients]
        read = all(
            claim == c.reader.assigned_partitions for claim, c in zip(claims, clients, strict=True)
        )
        if read and all(claims) and len(set().union(*claims)) == sum(map(len, claims)):
            for future in changed:
                future.cancel()
            return claims
        await asyncio.wait(changed, return_when=asyncio.FIRST_COMPLETED)
        for future in changed:
            future.cancel()


async def _read_keys(bootstrap: str, topic: str, keys: set[bytes]) -> list[Any]:
    """The records of `topic` with these keys, read from the start until each has come
    (or a deadline that only bounds a broken run)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    found: dict[bytes, Any] = {}
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(found) < len(keys) and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                found.update((r.key, r) for r in batch if r.key in keys)
    finally:
        await consumer.stop()
    return list(found.values())


async def test_each_client_receives_only_its_own_sessions_verdicts(
    worker: None, worker_env: WorkerEnv
) -> None:
    settings = worker_env.settings()
    async with (
        LoopwatchClient.from_settings(settings, verdict_timeout=TIMEOUT) as one,
        LoopwatchClient.from_settings(settings, verdict_timeout=TIMEOUT) as two,
    ):
        claims = await _disjoint_claims(one, two)
        assert set().union(*claims) == set(range(PARTITIONS))
        before = [one.reader.records_received, two.reader.records_received]
        sessions = {one: [f"one-{n}" for n in range(6)], two: [f"two-{n}" for n in range(6)]}
        published = {one: 0, two: 0}
        for client, ids in sessions.items():
            for sid in ids:
                session = await client.open_session(sid)
                await session.user("hi", message_index=0)
                await session.system("be brief", message_index=1)
                published[client] += 2
                wait = await session.verdicts()
                assert wait.complete, sid
                assert one.reader.assigned_partitions.isdisjoint(two.reader.assigned_partitions)
                session.close()
        # every verdict record each one received was one of its own sessions'
        assert one.reader.records_received - before[0] == published[one]
        assert two.reader.records_received - before[1] == published[two]


async def test_events_without_the_header_get_their_verdicts_by_key(
    worker: None, worker_env: WorkerEnv
) -> None:
    settings = worker_env.settings()
    async with LoopwatchClient.from_settings(
        settings, verdict_timeout=TIMEOUT, reply_partitions=False
    ) as old:
        assert await old.connect(TIMEOUT)
        assert old.reader.assigned_partitions == set(range(PARTITIONS))
        session = await old.open_session("old-style")
        await session.user("hi", message_index=0)
        wait = await session.verdicts()
        assert wait.complete


async def test_the_worker_routes_by_header_and_a_bad_header_by_key(
    worker: None, worker_env: WorkerEnv
) -> None:
    bootstrap = worker_env.bootstrap
    cases: dict[str, list[tuple[str, bytes]]] = {
        "to-three": [reply_header(3)],
        "to-zero": [reply_header(0)],
        "malformed": [(REPLY_PARTITION_HEADER, b"-1")],
        "out-of-range": [(REPLY_PARTITION_HEADER, b"99")],
        "no-header": [],
        "not-ours": [("other-header", b"2")],
    }
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for sid, headers in cases.items():
            event = {"v": 1, "type": "user_message", "session_id": f"hdr-{sid}", "seq": 0}
            event["ts"] = "2026-12-04T10:00:00+00:00"
            await producer.send_and_wait(
                worker_env.events,
                json.dumps(event).encode(),
                key=event["session_id"].encode(),
                headers=headers or None,
            )
    finally:
        await producer.stop()
    wanted = {f"hdr-{sid}".encode() for sid in cases}
    records = await _read_keys(bootstrap, worker_env.verdicts, wanted)
    partition_of = {r.key.decode(): r.partition for r in records if r.key.startswith(b"hdr-")}
    expected = {f"hdr-{sid}": partition_for(f"hdr-{sid}", PARTITIONS) for sid in cases}
    expected["hdr-to-three"], expected["hdr-to-zero"] = 3, 0
    assert partition_of == expected
