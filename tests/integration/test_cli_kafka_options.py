"""The Kafka commands' shared options on the real broker (issue 32): `--bootstrap` on every
one of them, `--json` for `topics create` and `policy list`, policy versions that never
go back after a delete, and one clear line from the dashboard without a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwatch.streams.commands.exit_codes import EXIT_KAFKA, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE
from loopwatch.streams.settings import Settings
from tests.integration.test_topics_cli import loopwatch, settings_env

NOWHERE = "127.0.0.1:1"  # nothing listens on port 1 of the loopback interface


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "create", "--timeout", "1"],
        ["policy", "list", "--timeout", "1"],
        ["worker", "--topic-timeout", "1"],
        ["otel-bridge", "--topic-timeout", "1"],
    ],
)
def test_bootstrap_wins_over_the_environment_on_every_kafka_command(command: list[str]) -> None:
    done = loopwatch(*command, "--bootstrap", NOWHERE, env={"KAFKA_BOOTSTRAP_SERVERS": "x:9"})
    assert done.returncode == EXIT_KAFKA, done.stderr
    assert f"Kafka is not reachable at {NOWHERE}" in done.stderr
    assert "docker run" in done.stderr and "make kafka-up" in done.stderr
    bad = loopwatch(*command, "--bootstrap", "no port", env={})
    assert bad.returncode == EXIT_USAGE and "--bootstrap" in bad.stderr


def test_dashboard_without_a_broker_says_so_in_one_line() -> None:
    done = loopwatch("dashboard", "--port", "1", "--bootstrap", NOWHERE, env={})
    assert done.returncode == EXIT_KAFKA
    assert done.stderr.strip().splitlines() == [
        line for line in done.stderr.strip().splitlines() if line.startswith("loopwatch dashboard:")
    ]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"Kafka is not reachable at {NOWHERE}" in done.stderr


@pytest.mark.kafka
async def test_dashboard_names_the_command_that_makes_the_topics(
    kafka_settings: Settings, kafka_admin: object
) -> None:
    env = {**settings_env(kafka_settings), "KAFKA_BOOTSTRAP_SERVERS": NOWHERE}
    done = loopwatch("dashboard", "--bootstrap", kafka_settings.bootstrap_servers, env=env)
    assert done.returncode == EXIT_USAGE
    assert "run `loopwatch topics create` first" in done.stderr


@pytest.mark.kafka
async def test_topics_create_json_and_bootstrap(
    kafka_settings: Settings, kafka_admin: object
) -> None:
    env = {**settings_env(kafka_settings), "KAFKA_BOOTSTRAP_SERVERS": NOWHERE}
    bootstrap = ("--bootstrap", kafka_settings.bootstrap_servers)
    first = loopwatch("topics", "create", *bootstrap, "--json", env=env)
    assert first.returncode == EXIT_OK, first.stderr
    topics = {record["name"]: record for record in map(json.loads, first.stdout.splitlines())}
    assert len(topics) == 7
    assert topics[kafka_settings.config_topic] == {
        "name": kafka_settings.config_topic,
        "created": True,
        "partitions": 1,
        "configs": {"cleanup.policy": "compact"},
    }
    again = loopwatch("topics", "create", *bootstrap, env=env)
    assert f"exists  {kafka_settings.config_topic} (1 partition; cleanup.policy" in again.stdout


@pytest.mark.kafka
async def test_policy_versions_never_go_back_after_a_delete(
    kafka_settings: Settings, kafka_admin: object, tmp_path: Path
) -> None:
    env = settings_env(kafka_settings)
    record = tmp_path / "policy.json"
    record.write_text('{"profile": "extended"}')

    def policy(*args: str) -> tuple[int, str]:
        done = loopwatch("policy", *args, env=env)
        return done.returncode, done.stdout + done.stderr

    assert policy("set", "agent-a", str(record)) == (
        EXIT_OK,
        "set agent-a version 1 (profile extended)\n",
    )
    assert policy("delete", "agent-a") == (EXIT_OK, "deleted agent-a (was version 1)\n")
    code, output = policy("get", "agent-a")
    assert code == EXIT_NOT_FOUND, output
    # the next version is above the deleted one: verdicts naming version 1 stay unambiguous
    assert policy("set", "agent-a", str(record)) == (
        EXIT_OK,
        "set agent-a version 3 (profile extended)\n",
    )
    # a record's own version that was already given is not given again
    record.write_text('{"version": 1, "profile": "seed"}')
    code, output = policy("set", "agent-a", str(record))
    assert (code, output) == (
        EXIT_OK,
        "set agent-a version 4 (profile seed; the record's version 1 was already used)\n",
    )
    record.write_text('{"version": 40, "profile": "seed"}')  # a new one is kept
    assert policy("set", "*", str(record))[1] == "set * version 40 (profile seed)\n"
    code, output = policy("list", "--json")
    assert code == EXIT_OK, output
    listed = [json.loads(line) for line in output.splitlines()]
    assert listed == [
        {
            "key": "*",
            "version": 40,
            "profile": "seed",
            "record": {"v": 1, "version": 40, "profile": "seed"},
        },
        {
            "key": "agent-a",
            "version": 4,
            "profile": "seed",
            "record": {"v": 1, "version": 4, "profile": "seed"},
        },
    ]
    assert policy("set", "agent-b", str(record))[1].startswith("set agent-b version 41 ")
