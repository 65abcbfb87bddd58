"""Topic creation against a real broker: partitions, configs, idempotence, co-partitioning."""

from __future__ import annotations

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from loopwatch.streams.kafka.admin import (
    CHANGELOG_CONFIGS,
    TopicError,
    create_topics,
    partition_counts,
)
from loopwatch.streams.settings import Settings

pytestmark = pytest.mark.kafka


def all_topics(settings: Settings) -> list[str]:
    return [
        settings.events_topic,
        settings.changelog_topic,
        settings.verdicts_topic,
        settings.warnings_topic,
        settings.dlq_topic,
        settings.episodes_topic,
        settings.config_topic,
    ]


def partitions(settings: Settings) -> dict[str, int]:
    """`partitions` each, but the verdicts topic's own count and the policy topic's 1."""
    assert settings.verdict_partitions != settings.partitions  # the fixture keeps them apart
    special = {settings.verdicts_topic: settings.verdict_partitions, settings.config_topic: 1}
    return {name: special.get(name, settings.partitions) for name in all_topics(settings)}


async def topic_config(admin: AIOKafkaAdminClient, topic: str, key: str) -> str:
    [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    [(error_code, _message, _type, _name, entries)] = response.resources
    assert error_code == 0
    values = {entry[0]: entry[1] for entry in entries}
    return str(values[key])


async def test_creates_every_topic_with_its_partitions_and_configs(
    kafka_settings: Settings, kafka_admin: AIOKafkaAdminClient
) -> None:
    outcomes = await create_topics(kafka_settings)

    assert [(o.name, o.created, o.partitions) for o in outcomes] == [
        (name, True, count) for name, count in partitions(kafka_settings).items()
    ]
    counts = await partition_counts(kafka_admin, all_topics(kafka_settings))
    assert counts == partitions(kafka_settings)
    s = kafka_settings
    assert await topic_config(kafka_admin, s.changelog_topic, "cleanup.policy") == "compact"
    for key, value in CHANGELOG_CONFIGS.items():
        assert await topic_config(kafka_admin, s.changelog_topic, key) == value
    assert int(CHANGELOG_CONFIGS["segment.bytes"]) < 1024**3, "below Kafka's default"
    assert await topic_config(kafka_admin, s.config_topic, "cleanup.policy") == "compact"
    assert await topic_config(kafka_admin, s.events_topic, "cleanup.policy") == "delete"
    for topic, seconds in [
        (s.events_topic, s.events_retention_seconds),
        (s.verdicts_topic, s.verdicts_retention_seconds),
        (s.warnings_topic, s.warnings_retention_seconds),
        (s.dlq_topic, s.dlq_retention_seconds),
        (s.episodes_topic, s.episodes_retention_seconds),
    ]:
        assert await topic_config(kafka_admin, topic, "retention.ms") == str(seconds * 1000)


async def test_creating_again_changes_nothing(
    kafka_settings: Settings, kafka_admin: AIOKafkaAdminClient
) -> None:
    await create_topics(kafka_settings)
    again = await create_topics(kafka_settings)

    assert [(o.created, o.partitions) for o in again] == [
        (False, count) for count in partitions(kafka_settings).values()
    ]
    assert await partition_counts(kafka_admin, all_topics(kafka_settings)) == partitions(
        kafka_settings
    )


async def test_an_events_topic_with_another_partition_count_is_refused(
    kafka_settings: Settings, kafka_admin: AIOKafkaAdminClient
) -> None:
    await kafka_admin.create_topics([NewTopic(kafka_settings.events_topic, 2, 1)])

    with pytest.raises(TopicError) as raised:
        await create_topics(kafka_settings)

    message = str(raised.value)
    assert f"topic {kafka_settings.events_topic} exists with 2 partitions" in message
    assert "LOOPWATCH_PARTITIONS is 3" in message


async def test_broker_refusal_is_reported_with_its_reason(
    kafka_settings: Settings, kafka_admin: AIOKafkaAdminClient
) -> None:
    # one broker cannot hold three replicas
    settings = kafka_settings.model_copy(update={"replication_factor": 3})

    with pytest.raises(TopicError, match=f"creating topic {settings.events_topic} failed"):
        await create_topics(settings)
