"""Each component checks at start-up that its principal holds its role's rights
(streams.kafka.acls) on its topics, and stops with one line naming any it lacks, instead of
failing at its first read or write (a worker without WRITE on its verdicts topic would
start, read an event, and retry its produce until giving up)."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient

from loopwatch.streams.kafka.acls import Names, Role, role_rights
from loopwatch.streams.kafka.authorized import (
    CoordinatedResource,
    missing_coordinator_rights,
    missing_topic_rights,
)

FAUST_TRANSACTIONAL_ID = "{prefix}0-0"
"""The transactional id of faust's producer for the first partition under a worker's
prefix (faust: `<group id>-<topic group>-<partition>`, the group id being the app id)."""


async def missing_rights(admin: AIOKafkaAdminClient, role: Role, names: Names) -> list[str]:
    """'<OPERATION> on topic <name>' for each topic right `role` needs and lacks, then
    '<OPERATION> on group <name>' and '... on transactional ids prefixed <prefix>' for
    each group or transactional id it holds no right on."""
    rights = role_rights(role, names)
    topics = [(name, ops) for resource, name, ops, _pattern in rights if resource == "topic"]
    coordinated: list[tuple[CoordinatedResource, str, str, tuple[str, ...]]] = []
    for resource, name, ops, pattern in rights:
        if resource == "group":
            coordinated.append(("group", name, f"group {name}", ops))
        elif resource == "transactional-id" and pattern == "prefixed":
            key = FAUST_TRANSACTIONAL_ID.format(prefix=name)
            coordinated.append(("transactional-id", key, f"transactional ids {name}*", ops))
    missing = await missing_topic_rights(admin._client, topics)
    return missing + await missing_coordinator_rights(admin._client, coordinated)


class MissingRight(RuntimeError):
    """The principal lacks a right its role needs; the message names each."""


async def require_rights(admin: AIOKafkaAdminClient, role: Role, names: Names) -> None:
    """MissingRight, naming every topic right `role` needs and this principal lacks."""
    missing = await missing_rights(admin, role, names)
    if missing:
        raise MissingRight(
            f"this principal lacks {', '.join(missing)}, which the {role} needs: grant "
            f"its rights (`loopwatch acls --role {role}`, docs/operations.md)"
        )
