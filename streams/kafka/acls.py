"""The least Kafka rights of each loopwatch role, derived from the configured names.

One principal per role (docs/operations.md, "Least privilege"): the worker, a runtime's
client, the dashboard, the otel-bridge and the admin who creates topics, writes policies
and grants these rights. Every right is on a literal name, except the worker's
transactional ids under exactly_once (faust names them `<app id>-<group>-<partition>`):
a prefix broad enough to be short would also cover topics a role must not touch (with the
default names, `loopwatch-` covers the config topic and every changelog).

Kafka implies DESCRIBE from READ or WRITE, and IDEMPOTENT_WRITE (the client's idempotent
producer) from WRITE on any topic (KIP-679), so neither is granted on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from loopwatch.streams.client.claim import runtime_group
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.settings import Settings
from loopwatch.streams.worker.policy_follower import dead_letter_group

Role = Literal["worker", "runtime", "dashboard", "bridge", "admin"]
ROLES: tuple[Role, ...] = ("worker", "runtime", "dashboard", "bridge", "admin")
ResourceType = Literal["topic", "group", "transactional-id", "cluster"]
PatternType = Literal["literal", "prefixed"]
Operation = Literal["READ", "WRITE", "CREATE", "DESCRIBE", "ALTER"]

CLUSTER_NAME = "kafka-cluster"
"""The one name of the cluster resource."""


@dataclass(frozen=True)
class Grant:
    """ALLOW `operations` on one resource to one principal."""

    role: Role
    principal: str
    resource: ResourceType
    name: str
    operations: tuple[Operation, ...]
    pattern: PatternType = "literal"


@dataclass(frozen=True)
class Names:
    """The names the rights are on: the settings' topics and app id, the bridge's own
    topics and group, and the runtimes' consumer group."""

    settings: Settings
    bridge: OtelSettings
    runtime_group: str

    @classmethod
    def of(cls, settings: Settings, bridge: OtelSettings, group: str | None = None) -> Names:
        return cls(settings, bridge, group or runtime_group(settings.verdicts_topic))


def role_rights(
    role: Role, names: Names
) -> list[tuple[ResourceType, str, tuple[Operation, ...], PatternType]]:
    """(resource type, name, operations, pattern) of everything `role` needs."""
    s, bridge = names.settings, names.bridge
    if role == "worker":
        rights: list[tuple[ResourceType, str, tuple[Operation, ...], PatternType]] = [
            ("topic", s.events_topic, ("READ",), "literal"),
            ("topic", s.config_topic, ("READ",), "literal"),
            ("topic", s.changelog_topic, ("READ", "WRITE"), "literal"),
            *(
                ("topic", name, ("WRITE",), "literal")
                for name in (s.verdicts_topic, s.warnings_topic, s.dlq_topic, s.episodes_topic)
            ),
            ("group", s.app_id, ("READ",), "literal"),
            ("group", dead_letter_group(s), ("READ",), "literal"),
        ]
        if s.processing_guarantee == "exactly_once":
            rights.append(("transactional-id", f"{s.app_id}-", ("WRITE",), "prefixed"))
        return rights
    if role == "runtime":
        return [
            ("topic", s.events_topic, ("WRITE",), "literal"),
            ("topic", s.verdicts_topic, ("READ",), "literal"),
            ("group", names.runtime_group, ("READ",), "literal"),
        ]
    if role == "dashboard":
        return [
            ("topic", s.warnings_topic, ("READ",), "literal"),
            ("topic", s.episodes_topic, ("READ",), "literal"),
        ]
    if role == "bridge":
        return [
            ("topic", bridge.spans_topic, ("READ",), "literal"),
            ("topic", bridge.internal_topic, ("READ", "WRITE"), "literal"),
            ("topic", bridge.changelog_topic, ("READ", "WRITE"), "literal"),
            ("topic", s.events_topic, ("WRITE",), "literal"),
            ("topic", s.dlq_topic, ("WRITE",), "literal"),
            ("group", bridge.app_id, ("READ",), "literal"),
        ]
    # admin: creates every topic (`loopwatch topics create`), writes and lists the
    # policies (`loopwatch policy`), grants the others' rights (`loopwatch acls --apply`)
    topics = [
        s.events_topic,
        s.changelog_topic,
        s.verdicts_topic,
        s.warnings_topic,
        s.dlq_topic,
        s.episodes_topic,
        bridge.spans_topic,
        bridge.internal_topic,
        bridge.changelog_topic,
    ]
    return [
        *(("topic", name, ("CREATE",), "literal") for name in topics),
        ("topic", s.config_topic, ("CREATE", "READ", "WRITE"), "literal"),
        ("cluster", CLUSTER_NAME, ("ALTER",), "literal"),
    ]


def grants(names: Names, principals: dict[Role, str], roles: Iterable[Role] = ROLES) -> list[Grant]:
    """Every grant of `roles`, to the principal of each (`User:<role>` when not given)."""
    return [
        Grant(role, principals.get(role, f"User:{role}"), resource, name, operations, pattern)
        for role in roles
        for resource, name, operations, pattern in role_rights(role, names)
    ]


def kafka_acls_command(grant: Grant, bootstrap: str, command_config: str | None) -> str:
    """The `kafka-acls.sh` command that makes `grant`."""
    parts = ["kafka-acls.sh", "--bootstrap-server", bootstrap]
    if command_config:
        parts += ["--command-config", command_config]
    parts += ["--add", "--allow-principal", grant.principal]
    for operation in grant.operations:
        parts += ["--operation", operation.capitalize()]
    if grant.resource == "cluster":
        parts.append("--cluster")
    else:
        parts += [f"--{grant.resource}", grant.name]
        parts += ["--resource-pattern-type", grant.pattern]
    return " ".join(_quoted(part) for part in parts)


def _quoted(part: str) -> str:
    plain = all(c.isalnum() or c in "-_.:/=,@" for c in part)
    return part if plain and part else "'" + part.replace("'", "'\\''") + "'"
