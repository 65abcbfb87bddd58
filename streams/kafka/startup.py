"""Start-up of a component on Kafka: its topics ensured, then its rights checked, so a
missing ACL stops it at once with one line (streams.kafka.rights) instead of failing at
its first read or write."""

from __future__ import annotations

from loopwatch.streams.kafka.acls import Names
from loopwatch.streams.kafka.admin import (
    TopicError,
    TopicOutcome,
    connect_admin,
    ensure_topics,
    topic_specs,
)
from loopwatch.streams.kafka.rights import MissingRight, require_rights
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.settings import Settings


async def prepare_worker(settings: Settings, timeout: float = 30.0) -> list[TopicOutcome]:
    """The worker's topics (created when missing), then its rights on them: TopicError
    naming the missing ones."""
    admin = await connect_admin(settings, timeout)
    try:
        outcomes = await ensure_topics(admin, topic_specs(settings), timeout)
        try:
            await require_rights(admin, "worker", Names.of(settings, OtelSettings(settings)))
        except MissingRight as exc:
            raise TopicError(str(exc)) from None
        return outcomes
    finally:
        await admin.close()
