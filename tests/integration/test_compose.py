"""docker-compose.yml: the services the README promises, wired as the app needs them.

`docker compose config` validates the file without an engine; the stack itself runs in
test_compose_stack.py.
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
    """The file as `docker compose` reads it with none of its variables set: each
    `${VAR:-default}` is its default (what a user gets)."""
    text = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", COMPOSE.read_text())
    loaded: dict[str, Any] = yaml.safe_load(text)
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
    """`docker compose` (the plugin) or Debian's `docker-compose` 1.29 (what CI runs)."""
    docker = shutil.which("docker")
    command: list[str] | None = None
    if (
        docker
        and not subprocess.run(
            [docker, "compose", "version"], capture_output=True, check=False
        ).returncode
    ):
        command = [docker, "compose"]
    elif shutil.which("docker-compose"):
        command = ["docker-compose"]
    if command is None:
        pytest.skip("neither the docker compose plugin nor docker-compose is installed")
    result = subprocess.run(
        [*command, "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_monitoring_profile_brings_prometheus_and_grafana_with_the_dashboard() -> None:
    services = compose()["services"]
    prometheus, grafana, worker = services["prometheus"], services["grafana"], services["worker"]
    assert prometheus["profiles"] == ["monitoring"]
    assert grafana["profiles"] == ["monitoring"]
    assert "profiles" not in worker  # the default `up` is unchanged

    def mounts(service: dict[str, Any]) -> dict[str, Path]:
        """Container path → the repository file or folder mounted there."""
        out = {}
        for volume in service["volumes"]:
            source, target, *_ = volume.split(":")
            if source.startswith("./"):
                out[target] = REPO / source
        return out

    prometheus_files = mounts(prometheus)
    for path in prometheus_files.values():
        assert path.exists(), path
    config_path = next(a for a in prometheus["command"] if a.startswith("--config.file="))
    config = yaml.safe_load(prometheus_files[config_path.split("=", 1)[1]].read_text())
    # rule files are relative to the config file: mounted beside it
    config_dir = config_path.split("=", 1)[1].rsplit("/", 1)[0]
    for rule_file in config["rule_files"]:
        assert f"{config_dir}/{rule_file}" in prometheus_files
    [job] = config["scrape_configs"]
    [target] = job["static_configs"][0]["targets"]
    host, port = target.split(":")
    assert host == "worker"
    assert port == worker["environment"]["LOOPWATCH_WEB_PORT"]
    assert worker["environment"]["LOOPWATCH_WEB_HOST"] == "0.0.0.0"

    grafana_files = mounts(grafana)
    provisioning = grafana_files["/etc/grafana/provisioning"]
    [source] = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())[
        "datasources"
    ]
    assert source["url"] == "http://prometheus:9090"
    assert "9090:9090" in prometheus["ports"]
    [provider] = yaml.safe_load((provisioning / "dashboards/loopwatch.yml").read_text())[
        "providers"
    ]
    dashboards = grafana_files[provider["options"]["path"]]
    assert (dashboards / "loopwatch.json").is_file()
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/loopwatch.json"
