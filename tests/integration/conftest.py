"""After each test module, delete the topics of the worker environments it made: a
developer's broker lives long (thousands of test partitions once made it fail with "Too
many open files"); CI's starts empty, but also gains from fewer partitions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from tests.integration.worker_harness import UNIQUE_PREFIXES


@pytest.fixture(autouse=True, scope="module")
def _delete_worker_topics() -> Iterator[None]:
    known = len(UNIQUE_PREFIXES)
    yield
    made = UNIQUE_PREFIXES[known:]
    del UNIQUE_PREFIXES[known:]
    by_broker: dict[str, list[str]] = {}
    for bootstrap, prefix in made:
        by_broker.setdefault(bootstrap, []).append(prefix)
    for bootstrap, prefixes in by_broker.items():
        asyncio.run(_delete_topics(bootstrap, tuple(prefixes)))


async def _delete_topics(bootstrap: str, prefixes: tuple[str, ...]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        await admin.start()
        names = [t for t in await admin.list_topics() if t.startswith(prefixes)]
        if names:
            await admin.delete_topics(names)
    except KafkaError:
        pass  # tidying only: the names are unique, a topic left behind harms no test
    finally:
        await admin.close()
