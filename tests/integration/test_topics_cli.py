"""`loopwatch topics create` as a user runs it: exit codes and messages."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from loopwatch.streams.settings import Settings


def loopwatch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def settings_env(settings: Settings) -> dict[str, str]:
    return {
        "KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "LOOPWATCH_APP_ID": settings.app_id,
        "LOOPWATCH_EVENTS_TOPIC": settings.events_topic,
        "LOOPWATCH_VERDICTS_TOPIC": settings.verdicts_topic,
        "LOOPWATCH_WARNINGS_TOPIC": settings.warnings_topic,
        "LOOPWATCH_DLQ_TOPIC": settings.dlq_topic,
        "LOOPWATCH_EPISODES_TOPIC": settings.episodes_topic,
        "LOOPWATCH_CONFIG_TOPIC": settings.config_topic,
        "LOOPWATCH_PARTITIONS": str(settings.partitions),
        "LOOPWATCH_VERDICT_PARTITIONS": str(settings.verdict_partitions),
    }


@pytest.mark.kafka
async def test_create_then_create_again(kafka_settings: Settings, kafka_admin: object) -> None:
    env = settings_env(kafka_settings)

    first = loopwatch("topics", "create", env=env)
    second = loopwatch("topics", "create", env=env)

    assert first.returncode == 0, first.stderr
    assert f"created {kafka_settings.events_topic} (3 partitions" in first.stdout
    assert f"created {kafka_settings.verdicts_topic} (2 partitions" in first.stdout
    assert (
        f"created {kafka_settings.changelog_topic} (3 partitions; cleanup.policy=compact, "
        "segment.bytes=67108864, segment.ms=3600000, min.cleanable.dirty.ratio=0.2)"
    ) in first.stdout
    assert second.returncode == 0, second.stderr
    assert "created" not in second.stdout
    assert f"created {kafka_settings.config_topic} (1 partition; cleanup.policy=compact)" in (
        first.stdout
    )
    # events, changelog, verdicts, warnings, dlq, episodes, config
    assert second.stdout.count("exists") == 7


def test_unreachable_broker_exits_1_naming_it() -> None:
    result = loopwatch(
        "topics", "create", "--timeout", "1", env={"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    )

    assert result.returncode == 1
    assert "Kafka is not reachable at 127.0.0.1:1" in result.stderr
    assert "make kafka-up" in result.stderr
    # one message, not a log line per connection attempt
    assert len(result.stderr.strip().splitlines()) == 1


def test_invalid_settings_exit_2_naming_the_variable() -> None:
    result = loopwatch("topics", "create", env={"LOOPWATCH_PARTITIONS": "abc"})

    assert result.returncode == 2
    assert "LOOPWATCH_PARTITIONS must be an integer >= 1, got 'abc'" in result.stderr
