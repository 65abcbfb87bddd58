"""Helpers of the secured-broker tests: one test's topics made and granted by the admin,
each role's settings on them, and the broker's refusals asserted with real clients."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, replace
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError

from loopwatch.streams.kafka.acl_admin import create_acls
from loopwatch.streams.kafka.acls import Grant
from loopwatch.streams.kafka.admin import connect_admin
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.otel.topics import create_bridge_topics
from loopwatch.streams.settings import Settings
from tests.integration.worker_harness import REPO_ROOT, UNIQUE_ENVS, WorkerEnv
from tests.support.kafka_broker import SecureBroker

REFUSED_WITHIN_SECONDS = 10.0
"""The issue's bound: a refusal stops a component within this, as a deadline."""
REFUSAL_TIMEOUT_MS = 5000
"""A refused write gives up after this (aiokafka retries the metadata until then)."""


def cli_env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without Kafka or loopwatch settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "LOOPWATCH_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


def run_cli(args: list[str], env: dict[str, str], timeout: float = 60.0) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", *args],
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO_ROOT,
    )


@dataclass(frozen=True)
class Deployment:
    """One test's loopwatch names on the secured broker (made by the admin)."""

    broker: SecureBroker
    env: WorkerEnv
    """The admin's environment (its topics are deleted after the module)."""
    kind: str = "sasl"

    @classmethod
    async def make(
        cls, broker: SecureBroker, kind: str = "sasl", names: tuple[tuple[str, str], ...] = ()
    ) -> Deployment:
        admin = broker.env("admin", kind)
        prefix = f"lw-it-{uuid.uuid4().hex[:10]}"
        bridge = (
            ("LOOPWATCH_OTEL_APP_ID", f"{prefix}-otel"),
            ("LOOPWATCH_OTEL_TOPIC", f"{prefix}-otlp"),
        )
        env = WorkerEnv(
            admin["KAFKA_BOOTSTRAP_SERVERS"], prefix, extra=(*admin.items(), *bridge, *names)
        )
        UNIQUE_ENVS.append(env)  # its topics are deleted after the test module
        deployment = cls(broker, env, kind)
        await env.create_topics()
        await create_bridge_topics(OtelSettings.from_env(env.env(web_port=6066)))
        return deployment

    def as_user(self, user: str) -> WorkerEnv:
        """The same names, with `user`'s credentials (not deleted afterwards: the
        admin's environment is)."""
        return replace(self.env, extra=(*self.env.extra, *self.broker.env(user, self.kind).items()))

    def settings(self, user: str) -> Settings:
        return self.as_user(user).settings()

    def otel(self, user: str) -> OtelSettings:
        return OtelSettings.from_env(self.as_user(user).env(web_port=6066))

    def grant(self, *roles: str, principals: dict[str, str] | None = None) -> Any:
        """`loopwatch acls --apply` as the admin, for `roles` on these names."""
        args = ["acls", "--apply"]
        for role in roles:
            args += ["--role", role]
        for role, principal in (principals or {}).items():
            args += ["--principal", f"{role}={principal}"]
        done = run_cli(args, self.env.env(web_port=6066))
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    async def grant_only(self, grants: list[Grant]) -> None:
        """Exactly these grants (a test that leaves one out)."""
        admin = await connect_admin(self.env.settings())
        try:
            await create_acls(admin, grants, lambda _grant: None)
        finally:
            await admin.close()


async def read_refused(settings: Settings, topic: str, group: str) -> bool:
    """True when the broker refuses `settings`' principal to read `topic` (as a member of
    `group`, a group it may use, so the refusal is the topic's)."""
    consumer = AIOKafkaConsumer(
        topic,
        **settings.aiokafka_kwargs(),
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REFUSAL_TIMEOUT_MS,
    )
    try:
        await consumer.start()
        await consumer.getmany(timeout_ms=REFUSAL_TIMEOUT_MS)
    except TopicAuthorizationFailedError:
        return True
    finally:
        await consumer.stop()
    return False


async def write_refused(settings: Settings, topic: str) -> bool:
    """True when the broker refuses `settings`' principal to write to `topic`."""
    producer = AIOKafkaProducer(**settings.aiokafka_kwargs(), request_timeout_ms=REFUSAL_TIMEOUT_MS)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"{}", key=b"intruder")
    except TopicAuthorizationFailedError:
        return True
    finally:
        await producer.stop()
    return False


async def produce_as(
    settings: Settings, topic: str, records: list[tuple[bytes | None, bytes | None]]
) -> None:
    producer = AIOKafkaProducer(**settings.aiokafka_kwargs(), acks="all")
    await producer.start()
    try:
        for key, value in records:
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


async def consume_as(
    settings: Settings, topic: str, *, until: int, deadline: float = 90.0
) -> list[Any]:
    """`topic` from its start until `until` records arrived or the deadline passed."""
    consumer = AIOKafkaConsumer(
        topic, **settings.aiokafka_kwargs(), auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    records: list[Any] = []
    try:
        end = time.monotonic() + deadline
        while len(records) < until and time.monotonic() < end:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                records.extend(batch)
    finally:
        await consumer.stop()
    return records


def page(url: str, token: str | None = None) -> tuple[int, str]:
    """(status, body text) of a page; (0, '') while nothing answers."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""
