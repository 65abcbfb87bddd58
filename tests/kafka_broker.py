"""A real Kafka broker for the test session: the one named by KAFKA_BOOTSTRAP_SERVERS, or
the local broker of ops/kafka, started once and stopped at the end if the tests started it.

Several pytest sessions may share the local broker (developers working in one tree): each
holds a lease file while it runs, and the broker is stopped only by the last session out,
and only if tests (not a person's `make kafka-up`) started it.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from streams.kafka_admin import BrokerUnreachable, wait_for_broker
from streams.settings import Settings, SettingsError

REPO = Path(__file__).resolve().parents[1]
KAFKA_SH = REPO / "ops" / "kafka" / "kafka.sh"
# the first start on a fresh machine downloads ~45 MB of jars with Maven
START_TIMEOUT_SECONDS = 600
REACH_TIMEOUT_SECONDS = 30.0


class BrokerUnavailable(RuntimeError):
    """No broker could be had; the message says why and where to look."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def no_broker(reason: str) -> NoReturn:
    """Fail (under CI=true) or skip the test that needed a broker, saying why."""
    message = f"no Kafka broker for the tests: {reason}"
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message + " (set KAFKA_BOOTSTRAP_SERVERS, or make sure Java and Maven work)")


@dataclass(frozen=True)
class LocalBroker:
    data_dir: Path

    @property
    def lease(self) -> Path:
        return self.data_dir / "leases" / str(os.getpid())


def _kafka_sh(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPWATCH_KAFKA_FOR_TESTS": "1"}
    return subprocess.run(
        [str(KAFKA_SH), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def _leases_locked(data_dir: Path) -> Iterator[None]:
    # serialises "start or reuse + take a lease" against "last one out stops it"
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "leases.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_local_broker() -> LocalBroker:
    """Start (or reuse) the ops/kafka broker and take a lease on it."""
    found = _kafka_sh("datadir", timeout=30)
    broker = LocalBroker(Path(found.stdout.strip()))
    with _leases_locked(broker.data_dir):
        try:
            up = _kafka_sh("up", timeout=START_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired as exc:
            raise BrokerUnavailable(
                f"ops/kafka/kafka.sh up did not finish within {START_TIMEOUT_SECONDS} s"
            ) from exc
        if up.returncode != 0:
            raise BrokerUnavailable(
                f"ops/kafka/kafka.sh up failed (exit {up.returncode}):\n{up.stdout}{up.stderr}"
            )
        broker.lease.parent.mkdir(exist_ok=True)
        broker.lease.touch()
    return broker


def release_local_broker(broker: LocalBroker) -> None:
    """Drop our lease; stop the broker if tests started it and no other session holds it."""
    with _leases_locked(broker.data_dir):
        broker.lease.unlink(missing_ok=True)
        others = [
            lease
            for lease in broker.lease.parent.iterdir()
            if lease.name.isdigit() and _alive(int(lease.name))
        ]
        if not others and (broker.data_dir / "started-by-tests").exists():
            _kafka_sh("down", timeout=60)


def check_reachable(bootstrap_servers: str) -> None:
    try:
        settings = Settings.from_env({"KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers})
        asyncio.run(wait_for_broker(settings, timeout=REACH_TIMEOUT_SECONDS))
    except (SettingsError, BrokerUnreachable) as exc:
        raise BrokerUnavailable(str(exc)) from exc
