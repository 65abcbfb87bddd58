"""The demo's topics on a user's broker are its own, and are removed again at the end."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from loopwatch.streams.demo.naming import demo_names, new_run_prefix
from loopwatch.streams.kafka.admin import create_topics, delete_topics
from loopwatch.streams.settings import Settings

pytestmark = pytest.mark.kafka


async def topics_once_gone(admin: AIOKafkaAdminClient, names: set[str]) -> set[str]:
    """The broker's topics, once none of `names` is listed (or after a 30 s deadline)."""
    deadline = time.monotonic() + 30
    while True:
        topics = set(await admin.list_topics())
        if not topics & names or time.monotonic() > deadline:
            return topics
        await asyncio.sleep(0.1)  # metadata catching up, within the deadline


async def test_demo_topics_are_created_apart_and_removed_by_prefix(
    kafka_bootstrap: str, kafka_admin: AIOKafkaAdminClient
) -> None:
    prefix = new_run_prefix()
    settings = Settings.from_env(
        {"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "LOOPWATCH_PARTITIONS": "2"}
        | demo_names(prefix)
    )
    neighbour = Settings.from_env(
        {"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "LOOPWATCH_PARTITIONS": "2"}
        | demo_names(new_run_prefix())
    )
    made = {outcome.name for outcome in await create_topics(settings)}
    kept = {outcome.name for outcome in await create_topics(neighbour)}
    assert all(name.startswith(prefix) for name in made)
    assert settings.events_topic in made

    deleted = await delete_topics(settings, prefix)

    assert set(deleted) == made
    remaining = await topics_once_gone(kafka_admin, made)
    assert not remaining & made
    assert kept <= remaining
    await delete_topics(neighbour, neighbour.app_id)
