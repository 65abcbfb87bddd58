"""`docker compose up` on a real Docker engine: broker, topic init and worker come up, a
looping session published from the host gets its warning, the image runs as a non-root
user and is healthy by its own HEALTHCHECK, SIGTERM stops the worker cleanly, and
`down -v` leaves nothing behind (issue 28).

Docker Hub is out of reach in CI: ops/docker/offline/build-bases.sh builds the base
images from Debian's packages (cached by a hash of their inputs) and the worker's
dependencies come as wheels built on the host (`PIP_OPTIONS=--no-index`); the compose
file and the Dockerfile are the ones a user runs, with their public images as defaults.
Under CI=true a missing Docker engine fails the test; elsewhere it is skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from loopwatch.streams.demo.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / "ops" / "docker" / "wheels"
LOOPING = ROOT / "examples" / "sessions" / "looping.jsonl"


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI needs a Docker engine for the compose stack: {reason}")
    pytest.skip(reason)


def run(*args: str | Path, env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def docker_ready() -> None:
    if shutil.which("docker") is None or shutil.which("docker-compose") is None:
        unavailable("no docker client or docker-compose (apt-get install docker.io docker-compose)")
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if probe.returncode:
        unavailable(f"the Docker engine does not answer: {probe.stderr.strip()[-300:]}")


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[dict[str, str], str]]:
    docker_ready()
    bases = dict(
        line.split("=", 1)
        for line in run(ROOT / "ops/docker/offline/build-bases.sh").split()
        if "=" in line
    )
    # the worker's dependencies as wheels built here, where the package index answers
    WHEELS.mkdir(exist_ok=True)
    constraints = ROOT / "ops" / "constraints.txt"
    run(
        sys.executable, "-m", "pip", "wheel", "-q", "-w", WHEELS,
        "-c", constraints, f"{ROOT}[worker,rocksdb]",
    )  # fmt: skip
    run(sys.executable, "-m", "pip", "wheel", "-q", "-w", WHEELS, "setuptools>=77")
    project = f"lwstack{uuid.uuid4().hex[:8]}"
    kafka_port, worker_port = free_ports(), free_ports()
    env = {
        **os.environ,
        "COMPOSE_PROJECT_NAME": project,
        "DOCKER_BUILDKIT": "0",
        "COMPOSE_DOCKER_CLI_BUILD": "0",
        "LOOPWATCH_PYTHON_IMAGE": bases["PYTHON_IMAGE"],
        "LOOPWATCH_KAFKA_IMAGE": bases["KAFKA_IMAGE"],
        "LOOPWATCH_PIP_OPTIONS": "--no-index",
        "LOOPWATCH_KAFKA_PORT": str(kafka_port),
        "LOOPWATCH_WORKER_PORT": str(worker_port),
    }
    try:
        run("docker-compose", "build", "worker", env=env)
        run("docker-compose", "up", "-d", env=env, timeout=600)
        yield env, f"127.0.0.1:{kafka_port}"
    finally:
        logs = subprocess.run(
            ["docker-compose", "logs", "--no-color", "--tail", "80"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=False,
        )
        print(logs.stdout[-8000:])
        subprocess.run(
            ["docker-compose", "down", "-v", "--remove-orphans"],
            env=env,
            cwd=ROOT,
            check=False,
            timeout=300,
        )
        for wheel in WHEELS.glob("*.whl"):
            wheel.unlink()
        left = run("docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}")
        assert left.strip() == "", "docker-compose down -v left containers"


def container(env: dict[str, str], service: str) -> str:
    return run("docker-compose", "ps", "-q", service, env=env).strip()


def inspect(target: str, template: str) -> str:
    return run("docker", "inspect", "--format", template, target).strip()


def wait_healthy(env: dict[str, str], service: str, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while True:
        cid = container(env, service)
        status = inspect(cid, "{{.State.Health.Status}}") if cid else "absent"
        if status == "healthy":
            return cid
        assert time.monotonic() < deadline, f"{service} is {status} after {timeout:.0f}s"
        time.sleep(3)


async def publish_and_read_warning(bootstrap: str) -> dict[str, object]:
    run_id = f"compose-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for line in LOOPING.read_text().splitlines():
            event = json.loads(line)
            session = event["session_id"] = f"{run_id}-{event['session_id']}"
            await producer.send_and_wait(
                "agent-events", json.dumps(event).encode(), session.encode()
            )
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "loop-warnings", bootstrap_servers=bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        async with asyncio.timeout(120):
            async for record in consumer:
                warning = json.loads(record.value or b"{}")
                if str(warning.get("session_id", "")).startswith(run_id):
                    return dict(warning)
    finally:
        await consumer.stop()
    raise AssertionError("unreachable")


def test_compose_up_warns_a_looping_session_and_stops_cleanly(
    stack: tuple[dict[str, str], str],
) -> None:
    env, bootstrap = stack
    assert inspect(container(env, "topics"), "{{.State.ExitCode}}") == "0"
    worker = wait_healthy(env, "worker")
    # the image: non-root, its own HEALTHCHECK probes /healthz and passes
    assert inspect("loopwatch:local", "{{.Config.User}}") == "10001:10001"
    assert run("docker", "exec", worker, "id", "-u").strip() == "10001"
    check = json.loads(inspect("loopwatch:local", "{{json .Config.Healthcheck}}"))
    assert "/healthz" in " ".join(check["Test"])
    run("docker", "exec", worker, *check["Test"][1:])

    warning = asyncio.run(publish_and_read_warning(bootstrap))
    assert "repeated_" in json.dumps(warning), warning

    run("docker-compose", "stop", "-t", "60", "worker", env=env, timeout=120)
    assert inspect(worker, "{{.State.ExitCode}}") == "0", run(
        "docker", "logs", "--tail", "50", worker
    )
