"""docker-compose.yml: the services the README promises, wired as the app needs them.

No Docker engine runs here; `docker compose config` validates the file without one, and
runs when the docker client with its compose plugin is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def pinned_kafka_version() -> str:
    match = re.search(
        r'KAFKA_VERSION="\$\{KAFKA_VERSION:-([0-9.]+)\}"', (REPO / "ops/kafka/kafka.sh").read_text()
    )
    assert match is not None
    return match.group(1)


def test_kafka_is_the_same_version_as_the_local_broker() -> None:
    kafka = compose()["services"]["kafka"]
    assert kafka["image"] == f"apache/kafka:{pinned_kafka_version()}"
    pom = (REPO / "ops/kafka/pom.xml").read_text()
    assert f"<kafka.version>{pinned_kafka_version()}</kafka.version>" in pom


def test_kafka_runs_kraft_with_a_healthcheck_and_no_auto_create() -> None:
    kafka = compose()["services"]["kafka"]
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert str(env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"]) == "false"
    assert "kafka-topics.sh" in " ".join(kafka["healthcheck"]["test"])
    assert "9092:9092" in kafka["ports"]


def test_topics_then_worker_reach_the_internal_listener() -> None:
    services = compose()["services"]
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    topics, worker = services["topics"], services["worker"]

    assert topics["command"] == ["topics", "create"]
    assert topics["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert worker["command"] == ["worker"]
    assert worker["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    for service in (topics, worker):
        assert f"//{service['environment']['KAFKA_BOOTSTRAP_SERVERS']}" in advertised
        assert (REPO / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
    assert worker["environment"]["LOOPWATCH_STORE"] == "rocksdb://"
    # the worker is healthy when its /ready answers 200, with a stable worker id
    assert "http://127.0.0.1:6066/ready" in " ".join(worker["healthcheck"]["test"])
    assert worker["environment"]["LOOPWATCH_WORKER_ID"]


def test_docker_compose_config_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client installed")
    if subprocess.run([docker, "compose", "version"], capture_output=True, check=False).returncode:
        pytest.skip("the docker client has no compose plugin")
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
