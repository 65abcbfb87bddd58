"""Each component checks at start-up that its principal holds its role's rights
(streams.kafka.acls) on its topics, and stops with one line naming any it lacks, instead of
failing at its first read or write (a worker without WRITE on its verdicts topic would
start, read an event, and retry its produce until giving up)."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient

from loopwatch.streams.kafka.acls import Names, Role, role_rights
from loopwatch.streams.kafka.authorized import missing_topic_rights


async def missing_rights(admin: AIOKafkaAdminClient, role: Role, names: Names) -> list[str]:
    """'<OPERATION> on topic <name>' for each topic right `role` needs and lacks."""
    needed = [
        (name, operations)
        for resource, name, operations, _pattern in role_rights(role, names)
        if resource == "topic"
    ]
    return await missing_topic_rights(admin._client, needed)


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
