"""The bridge's topics: the two of the worker's it writes (`agent-events`, the DLQ), the
exporter's topic when missing, and its own co-partitioned pair (re-keyed span records and
the `otel-sessions` changelog). Only those: its principal needs no right on the worker's
other topics (docs/operations.md, "Least privilege")."""

from __future__ import annotations

from loopwatch.streams.kafka.acls import Names
from loopwatch.streams.kafka.admin import (
    TopicError,
    TopicOutcome,
    TopicSpec,
    connect_admin,
    ensure_topics,
    topic_specs,
)
from loopwatch.streams.kafka.rights import MissingRight, require_rights
from loopwatch.streams.otel.settings import OtelSettings

DAY_SECONDS = 24 * 3600


def bridge_topic_specs(settings: OtelSettings) -> list[TopicSpec]:
    base = settings.base
    n, rf = base.partitions, base.replication_factor
    retention = {"retention.ms": str(DAY_SECONDS * 1000)}
    return [
        *(spec for spec in topic_specs(base) if spec.name in (base.events_topic, base.dlq_topic)),
        # Usually created by whoever runs the Collector; any partition count works.
        TopicSpec(settings.spans_topic, n, rf, retention),
        TopicSpec(settings.internal_topic, n, rf, retention, must_match_partitions=True),
        TopicSpec(
            settings.changelog_topic,
            n,
            rf,
            {"cleanup.policy": "compact"},
            must_match_partitions=True,
        ),
    ]


async def create_bridge_topics(settings: OtelSettings, timeout: float = 30.0) -> list[TopicOutcome]:
    """The bridge's topics (created when missing), then its rights on them (TopicError
    naming a missing one: streams.kafka.rights)."""
    admin = await connect_admin(settings.base, timeout)
    try:
        outcomes = await ensure_topics(admin, bridge_topic_specs(settings), timeout)
        try:
            await require_rights(admin, "bridge", Names.of(settings.base, settings))
        except MissingRight as exc:
            raise TopicError(str(exc)) from None
        return outcomes
    finally:
        await admin.close()
