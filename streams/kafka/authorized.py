"""What the broker lets this principal do on each topic (one Metadata request).

A principal missing a right fails late and badly: a worker without WRITE on its verdicts
topic starts, reads an event, and then its producer retries until it gives up. Kafka's
Metadata request (v8+) answers, per topic, the operations the asking principal is
authorised for, so a component can check its role's rights (streams.kafka.acls) before
it starts and stop with one line naming the missing one. aiokafka 0.14 speaks Metadata
up to v5 only, hence the v8 request and response here (the wire format of
org.apache.kafka.common.message.MetadataRequest/Response, version 8).

Kafka has no such question for groups and transactional ids, but its FindCoordinator
request is authorised per key (DESCRIBE on the group or the transactional id, which the
READ and WRITE a role is granted imply), so asking for a coordinator tells a principal
without any right on them apart: `missing_coordinator_rights`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeAlias

from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    IncompatibleBrokerVersion,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Array, Boolean, Int16, Int32, Schema, String

OPERATION_CODES = {"READ": 3, "WRITE": 4, "CREATE": 5, "ALTER": 7, "DESCRIBE": 8}
"""Kafka's wire codes of the ACL operations loopwatch grants (org.apache.kafka.common.acl)."""

NOT_PROVIDED = -(2**31)
"""Kafka's value of authorized operations it did not compute."""


class MetadataResponse_v8(Response):  # type: ignore[misc]  # Kafka's names, as aiokafka's
    API_KEY = 3
    API_VERSION = 8
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "brokers",
            Array(
                ("node_id", Int32),
                ("host", String("utf-8")),
                ("port", Int32),
                ("rack", String("utf-8")),
            ),
        ),
        ("cluster_id", String("utf-8")),
        ("controller_id", Int32),
        (
            "topics",
            Array(
                ("error_code", Int16),
                ("topic", String("utf-8")),
                ("is_internal", Boolean),
                (
                    "partitions",
                    Array(
                        ("error_code", Int16),
                        ("partition", Int32),
                        ("leader", Int32),
                        ("leader_epoch", Int32),
                        ("replicas", Array(Int32)),
                        ("isr", Array(Int32)),
                        ("offline_replicas", Array(Int32)),
                    ),
                ),
                ("topic_authorized_operations", Int32),
            ),
        ),
        ("cluster_authorized_operations", Int32),
    )


class MetadataRequest_v8(RequestStruct):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 8
    RESPONSE_TYPE = MetadataResponse_v8
    SCHEMA = Schema(
        ("topics", Array(String("utf-8"))),
        ("allow_auto_topic_creation", Boolean),
        ("include_cluster_authorized_operations", Boolean),
        ("include_topic_authorized_operations", Boolean),
    )


AuthorizedOperationsStruct: TypeAlias = MetadataRequest_v8


class AuthorizedOperationsRequest(Request[AuthorizedOperationsStruct]):  # type: ignore[misc]
    """Metadata of `topics` with the operations this principal may do on each."""

    API_KEY = 3

    def __init__(self, topics: list[str]) -> None:
        self._topics = topics

    def build(self, request_struct_class: type[AuthorizedOperationsStruct]) -> Any:
        return request_struct_class(self._topics, False, False, True)


async def topic_operations(client: AIOKafkaClient, topics: Iterable[str]) -> dict[str, set[str]]:
    """{topic: the operations (of OPERATION_CODES) this principal may do on it}; a topic
    it may not even see has none. Topics the broker did not answer for are left out.
    `client`: any started aiokafka client's connection pool (`producer.client`,
    `admin._client`)."""
    request = AuthorizedOperationsRequest(sorted(set(topics)))
    try:
        response: Any = await client.send(client.get_random_node(), request)
    except (NotImplementedError, IncompatibleBrokerVersion):
        return {}  # a broker older than Kafka 2.3 cannot tell: nothing is checked
    allowed: dict[str, set[str]] = {}
    for topic in response.topics:
        error, name, _internal, _partitions, bits = topic
        if error == TopicAuthorizationFailedError.errno:
            allowed[name] = set()
        elif bits != NOT_PROVIDED:
            allowed[name] = {op for op, code in OPERATION_CODES.items() if bits & (1 << code)}
    return allowed


async def missing_topic_rights(
    client: AIOKafkaClient, needed: Sequence[tuple[str, Sequence[str]]]
) -> list[str]:
    """'<OPERATION> on topic <name>' for each of `needed` (topic, operations) lacking."""
    allowed = await topic_operations(client, [name for name, _ in needed])
    return [
        f"{operation} on topic {name}"
        for name, operations in needed
        if name in allowed
        for operation in operations
        if operation not in allowed[name]
    ]


CoordinatedResource = Literal["group", "transactional-id"]

COORDINATOR_WAIT_SECONDS = 5.0
"""How long a coordinator that is not available yet (Kafka creates its transaction log at
the first lookup) is asked again; after that the right is taken as held, and a real lack
shows at first use."""


async def holds_coordinated(
    client: AIOKafkaClient,
    resource: CoordinatedResource,
    key: str,
    wait: float = COORDINATOR_WAIT_SECONDS,
) -> bool:
    """Whether this principal may use the group or transactional id `key` at all: False
    when the broker refuses to name its coordinator for lack of a right."""
    kind = CoordinationType.GROUP if resource == "group" else CoordinationType.TRANSACTION
    refused = (
        GroupAuthorizationFailedError if resource == "group" else TransactionalIdAuthorizationFailed
    )
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        try:
            await client.coordinator_lookup(kind, key)
            return True
        except refused:
            return False
        except (NotImplementedError, IncompatibleBrokerVersion):
            return True  # a broker too old to be asked: nothing is checked
        except KafkaError as exc:
            if not exc.retriable or asyncio.get_running_loop().time() >= deadline:
                return True
            await asyncio.sleep(0.2)  # the broker's retry back-off, not a synchronisation


async def missing_coordinator_rights(
    client: AIOKafkaClient, needed: Sequence[tuple[CoordinatedResource, str, str, Sequence[str]]]
) -> list[str]:
    """'<OPERATION> on <described>' for each of `needed` (resource, key to ask about,
    how to describe it, operations) this principal holds no right on."""
    missing: list[str] = []
    for resource, key, described, operations in needed:
        if not await holds_coordinated(client, resource, key):
            missing.extend(f"{operation} on {described}" for operation in operations)
    return missing
