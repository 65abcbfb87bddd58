"""Kafka topics for loopwatch, created explicitly (the broker's auto-create stays off).

The events topic and the `sessions` table's changelog must have the same partition count:
faust reads a session's state from the changelog partition with the number of the events
partition it arrived on (co-partitioning). So both are created here, from one setting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    KafkaError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    for_code,
)

from loopwatch.streams.kafka.security import refusal
from loopwatch.streams.settings import Settings

RETRY_BACKOFF_SECONDS = 0.25


class BrokerUnreachable(RuntimeError):
    """No broker answered a metadata request before the deadline."""


class BrokerDenied(BrokerUnreachable):
    """The broker refused our credentials or certificate, or an ACL is missing: the
    message names the setting or the right; retrying would not help."""


class TopicError(RuntimeError):
    """A topic could not be created, or exists in a shape loopwatch cannot use."""


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)
    must_match_partitions: bool = False
    """True for the co-partitioned pair: an existing topic with another count is an error."""


@dataclass(frozen=True)
class TopicOutcome:
    name: str
    created: bool
    partitions: int


def _retention(seconds: int) -> dict[str, str]:
    return {"retention.ms": str(-1 if seconds == -1 else seconds * 1000)}


CHANGELOG_CONFIGS = {
    "cleanup.policy": "compact",
    # Compaction never touches the active segment, and Kafka's defaults (1 GiB, 7 days)
    # left a partition's whole history uncompacted: a restart without local state re-read
    # one ~1 KB snapshot per event instead of one per open session. 64 MiB or one hour,
    # whichever comes first, ...
    "segment.bytes": str(64 * 1024 * 1024),
    "segment.ms": str(60 * 60 * 1000),
    # ... and a partition is cleaned once a fifth of it is superseded snapshots (Kafka's
    # default waits for half).
    "min.cleanable.dirty.ratio": "0.2",
}
"""The sessions changelog's topic configs (docs/operations.md, "The changelog")."""


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """Every topic the worker reads or writes, with its partitions and configs."""
    n, rf = settings.partitions, settings.replication_factor
    return [
        TopicSpec(
            settings.events_topic,
            n,
            rf,
            _retention(settings.events_retention_seconds),
            must_match_partitions=True,
        ),
        # compacted, never deleted by age: it is the table's state
        TopicSpec(settings.changelog_topic, n, rf, CHANGELOG_CONFIGS, must_match_partitions=True),
        # read whole by every runtime's client: few partitions (Settings.verdict_partitions)
        TopicSpec(
            settings.verdicts_topic,
            settings.verdict_partitions,
            rf,
            _retention(settings.verdicts_retention_seconds),
        ),
        TopicSpec(settings.warnings_topic, n, rf, _retention(settings.warnings_retention_seconds)),
        TopicSpec(settings.dlq_topic, n, rf, _retention(settings.dlq_retention_seconds)),
        # retained, not compacted: an episode is an event to count over time, and its
        # key is the session (per-session order, like verdicts), not a unique id
        TopicSpec(settings.episodes_topic, n, rf, _retention(settings.episodes_retention_seconds)),
        # per-agent policies: compacted (the newest record per agent id is the policy),
        # one partition (every worker reads all of it; it is tiny)
        TopicSpec(settings.config_topic, 1, rf, {"cleanup.policy": "compact"}),
    ]


START_A_BROKER = (
    "Point KAFKA_BOOTSTRAP_SERVERS (or --bootstrap) at a running broker, or start one: "
    "`docker run -d -p 9092:9092 apache/kafka:4.1.2` (in a checkout of the loopwatch "
    "repository: `make kafka-up`)."
)
"""The way out when no broker answers, for a pip-installed user and for a checkout."""


def unreachable_message(bootstrap_servers: str, detail: str, timeout: float) -> str:
    return (
        f"Kafka is not reachable at {bootstrap_servers} within {timeout:g} s ({detail}). "
        f"{START_A_BROKER}"
    )


async def connect_admin(settings: Settings, timeout: float = 30.0) -> AIOKafkaAdminClient:
    """A started admin client, once a broker has answered a metadata request.

    Retries until `timeout` seconds have passed (a broker may still be starting), then
    raises BrokerUnreachable naming the bootstrap servers. A secured broker that refuses
    the credentials or certificate raises BrokerDenied at once (streams.kafka.security).
    """
    deadline = time.monotonic() + timeout
    detail = "no attempt"
    while True:
        reason = await refusal(settings)
        if reason is not None:
            raise BrokerDenied(reason)
        remaining = deadline - time.monotonic()
        admin = AIOKafkaAdminClient(
            **settings.aiokafka_kwargs(),
            client_id=f"{settings.app_id}-admin",
            request_timeout_ms=max(1000, int(min(remaining, 30.0) * 1000)),
        )
        try:
            async with asyncio.timeout(max(remaining, 0.1)):
                await admin.start()
                cluster = await admin.describe_cluster()
            if cluster["brokers"]:
                return admin
            detail = "no live brokers in the metadata yet"
        except (KafkaError, OSError, TimeoutError) as exc:
            detail = str(exc) or type(exc).__name__
        await admin.close()
        if time.monotonic() >= deadline:
            raise BrokerUnreachable(
                unreachable_message(settings.bootstrap_servers, detail, timeout)
            )
        await asyncio.sleep(RETRY_BACKOFF_SECONDS)  # retry backoff inside a deadline


async def wait_for_broker(settings: Settings, timeout: float = 30.0) -> None:
    """Return once a broker serves metadata; BrokerUnreachable after `timeout` seconds."""
    admin = await connect_admin(settings, timeout)
    await admin.close()


async def partition_counts(admin: AIOKafkaAdminClient, names: Iterable[str]) -> dict[str, int]:
    """Partitions of each existing topic among `names` (absent topics are left out)."""
    described: list[dict[str, Any]] = await admin.describe_topics(list(names))
    return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0}


async def ensure_topics(
    admin: AIOKafkaAdminClient, specs: list[TopicSpec], timeout: float = 30.0
) -> list[TopicOutcome]:
    """Create the topics that are missing; check the partitions of those that exist.

    Idempotent. An existing topic keeps its configs: changing retention on a live topic
    is an operator's decision, not a side effect of start-up. Only missing topics are
    created, so a principal without the CREATE right (least privilege: an admin made the
    topics) only needs DESCRIBE on them.
    """
    existing = await partition_counts(admin, [s.name for s in specs])
    missing = [s for s in specs if s.name not in existing]
    created: set[str] = set()
    if missing:
        response = await admin.create_topics(
            [
                NewTopic(s.name, s.partitions, s.replication_factor, topic_configs=dict(s.configs))
                for s in missing
            ],
            timeout_ms=int(timeout * 1000),
        )
        for name, code, *message in response.topic_errors:
            if code == 0:
                created.add(name)
            elif code == TopicAuthorizationFailedError.errno:
                raise TopicError(
                    f"this principal has no right on topic {name} (Kafka answers "
                    "TOPIC_AUTHORIZATION_FAILED: it may neither see nor create it): grant "
                    "its role's rights (`loopwatch acls`), or if the topic is missing, "
                    "create it as the admin (`loopwatch topics create`)"
                )
            elif code != TopicAlreadyExistsError.errno:
                reason = message[0] if message and message[0] else for_code(code).__name__
                raise TopicError(f"creating topic {name} failed: {reason}")
    counts = await _wait_for_leaders(admin, [s.name for s in specs], timeout)
    for spec in specs:
        if spec.must_match_partitions and counts[spec.name] != spec.partitions:
            raise TopicError(
                f"topic {spec.name} exists with {counts[spec.name]} partitions, but "
                f"LOOPWATCH_PARTITIONS is {spec.partitions}; the events topic and the "
                "sessions changelog must have the same count. Set LOOPWATCH_PARTITIONS="
                f"{counts[spec.name]}, or delete the topic."
            )
    return [TopicOutcome(s.name, s.name in created, counts[s.name]) for s in specs]


async def _wait_for_leaders(
    admin: AIOKafkaAdminClient, names: list[str], timeout: float
) -> dict[str, int]:
    # A created topic is usable once every partition has a leader in the metadata;
    # producing before that fails with UNKNOWN_TOPIC_OR_PARTITION.
    deadline = time.monotonic() + timeout
    while True:
        described: list[dict[str, Any]] = await admin.describe_topics(names)
        ready = {
            t["topic"]: len(t["partitions"])
            for t in described
            if t["error_code"] == 0
            and t["partitions"]
            and all(p["leader"] >= 0 for p in t["partitions"])
        }
        if len(ready) == len(set(names)):
            return ready
        if time.monotonic() >= deadline:
            missing = sorted(set(names) - set(ready))
            raise TopicError(f"topics without partition leaders after {timeout:g} s: {missing}")
        await asyncio.sleep(RETRY_BACKOFF_SECONDS)  # retry backoff inside a deadline


async def create_topics(settings: Settings, timeout: float = 30.0) -> list[TopicOutcome]:
    """Connect (waiting up to `timeout` for a broker) and ensure every loopwatch topic."""
    admin = await connect_admin(settings, timeout)
    try:
        return await ensure_topics(admin, topic_specs(settings), timeout)
    finally:
        await admin.close()


async def delete_topics(settings: Settings, prefix: str, timeout: float = 30.0) -> list[str]:
    """Delete every topic whose name starts with `prefix` (the demo's clean-up)."""
    admin = await connect_admin(settings, timeout)
    try:
        names = sorted(name for name in await admin.list_topics() if name.startswith(prefix))
        if names:
            await admin.delete_topics(names, timeout_ms=int(timeout * 1000))
        return names
    finally:
        await admin.close()
