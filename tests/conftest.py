"""Fixtures shared by every test directory: a real Kafka broker, and names unique per test.

`kafka_bootstrap` uses KAFKA_BOOTSTRAP_SERVERS when it is set, otherwise the local broker
of ops/kafka (started once per session). Under CI=true a broker that cannot be had fails
the tests that need it; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from loopwatch.streams.settings import Settings
from tests.support.kafka_broker import (
    BrokerUnavailable,
    batch_hand_off_env,
    check_reachable,
    no_broker,
    release_local_broker,
    start_local_broker,
)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """host:port list of a running Kafka broker for this test session."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if configured:
        try:
            check_reachable(configured)
        except BrokerUnavailable as exc:
            no_broker(str(exc))
        yield configured
        return
    try:
        start_local_broker()
    except BrokerUnavailable as exc:
        no_broker(str(exc))
    try:
        yield f"127.0.0.1:{os.environ.get('KAFKA_PORT', '9092')}"
    finally:
        release_local_broker()


@dataclass(frozen=True)
class UniqueNames:
    """`unique_name("events")` → a topic/group name no other test (or run) uses."""

    prefix: str

    def __call__(self, role: str) -> str:
        return f"{self.prefix}{role}"


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> UniqueNames:
    test = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:60]
    return UniqueNames(f"lw-{test}-{uuid.uuid4().hex[:8]}-")


@pytest.fixture
def topic_name(unique_name: UniqueNames) -> str:
    return unique_name("topic")


@pytest.fixture
def group_id(unique_name: UniqueNames) -> str:
    return unique_name("group")


@pytest.fixture
def kafka_settings(kafka_bootstrap: str, unique_name: UniqueNames) -> Settings:
    """Settings whose app id and topics belong to this test alone (3 partitions; 2 for the
    verdicts topic, so every test runs with the two counts apart, as deployed)."""
    return Settings.from_env(
        {
            "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
            "LOOPWATCH_APP_ID": unique_name("app"),
            "LOOPWATCH_EVENTS_TOPIC": unique_name("events"),
            "LOOPWATCH_VERDICTS_TOPIC": unique_name("verdicts"),
            "LOOPWATCH_WARNINGS_TOPIC": unique_name("warnings"),
            "LOOPWATCH_DLQ_TOPIC": unique_name("dlq"),
            "LOOPWATCH_EPISODES_TOPIC": unique_name("episodes"),
            "LOOPWATCH_CONFIG_TOPIC": unique_name("config"),
            "LOOPWATCH_PARTITIONS": "3",
            "LOOPWATCH_VERDICT_PARTITIONS": "2",
            **batch_hand_off_env(),
        }
    )


@pytest.fixture
async def kafka_admin(
    kafka_bootstrap: str, unique_name: UniqueNames
) -> AsyncIterator[AIOKafkaAdminClient]:
    """An admin client; at the end it deletes the topics this test's unique names made."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        yield admin
    finally:
        try:
            mine = [t for t in await admin.list_topics() if t.startswith(unique_name.prefix)]
            if mine:
                await admin.delete_topics(mine)
        except KafkaError:
            pass  # tidying only: a topic left behind has a unique name and harms nobody
        await admin.close()
