"""After each test module, delete the topics of the worker environments it made: a
developer's broker lives long (thousands of test partitions once made it fail with "Too
many open files"); CI's starts empty, but also gains from fewer partitions."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest
from aiokafka.errors import KafkaError

from loopwatch.streams.kafka.admin import BrokerUnreachable, delete_topics
from tests.integration.worker_harness import UNIQUE_ENVS
from tests.support.kafka_broker import (
    BrokerUnavailable,
    SecureBroker,
    no_broker,
    release_secure_broker,
    start_secure_broker,
)


@pytest.fixture(scope="session")
def secure_broker() -> Iterator[SecureBroker]:
    """The `kafka.sh --secure` broker, one per test session (test_secured_*.py)."""
    try:
        broker = start_secure_broker()
    except BrokerUnavailable as exc:
        no_broker(f"the secured broker: {exc}")
    try:
        yield broker
    finally:
        release_secure_broker()


@pytest.fixture(autouse=True, scope="module")
def _delete_worker_topics() -> Iterator[None]:
    known = len(UNIQUE_ENVS)
    yield
    made = UNIQUE_ENVS[known:]
    del UNIQUE_ENVS[known:]
    for env in made:
        # tidying only: the names are unique, a topic left behind harms no test
        with contextlib.suppress(KafkaError, BrokerUnreachable):
            asyncio.run(delete_topics(env.settings(), env.prefix))
