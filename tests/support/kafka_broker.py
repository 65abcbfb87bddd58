"""A real Kafka broker for the test session: the one named by KAFKA_BOOTSTRAP_SERVERS, or
the local broker of ops/kafka, started once and stopped at the end if the tests started it.

Several pytest sessions (and the demo) may share the local broker: each holds a lease
(`kafka.sh acquire`/`release`), and the broker is stopped only by the last one out, and
only if a lease holder (not a person's `make kafka-up`) started it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

from loopwatch.streams.kafka.admin import BrokerUnreachable, wait_for_broker
from loopwatch.streams.settings import Settings, SettingsError

REPO = Path(__file__).resolve().parents[2]
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


def _kafka_sh(
    command: str, timeout: float, *, secure: bool = False
) -> subprocess.CompletedProcess[str]:
    # the lease is held by this pytest process: if it dies without releasing, the next
    # `release` by anyone sees a dead holder and may stop the broker
    env = {**os.environ, "LOOPWATCH_KAFKA_LEASE": str(os.getpid())}
    return subprocess.run(
        [str(KAFKA_SH), *(["--secure"] if secure else []), command],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _acquire(*, secure: bool) -> None:
    """Start (or reuse) a broker of ops/kafka, holding a lease on it."""
    script = "ops/kafka/kafka.sh --secure" if secure else "ops/kafka/kafka.sh"
    try:
        up = _kafka_sh("acquire", timeout=START_TIMEOUT_SECONDS, secure=secure)
    except subprocess.TimeoutExpired as exc:
        raise BrokerUnavailable(
            f"{script} acquire did not finish within {START_TIMEOUT_SECONDS} s"
        ) from exc
    if up.returncode != 0:
        raise BrokerUnavailable(
            f"{script} acquire failed (exit {up.returncode}):\n{up.stdout}{up.stderr}"
        )


def start_local_broker() -> None:
    """Start (or reuse) the ops/kafka broker, holding a lease on it."""
    _acquire(secure=False)


def release_local_broker() -> None:
    """Drop our lease: the broker stops if we (or another lease holder) started it and no
    other session still holds it; a broker a person started with `make kafka-up` stays."""
    _kafka_sh("release", timeout=120)


def check_reachable(bootstrap_servers: str) -> None:
    try:
        settings = Settings.from_env({"KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers})
        asyncio.run(wait_for_broker(settings, timeout=REACH_TIMEOUT_SECONDS))
    except (SettingsError, BrokerUnreachable) as exc:
        raise BrokerUnavailable(str(exc)) from exc


class SecureBroker:
    """The `kafka.sh --secure` broker: SASL_SSL (SCRAM) and mTLS listeners, ACLs on."""

    def __init__(self, datadir: Path) -> None:
        self.datadir = datadir

    def env(self, user: str, kind: str = "sasl") -> dict[str, str]:
        """USER's client settings (KAFKA_* variables) over `sasl` or `mtls`."""
        lines = (self.datadir / "clients" / f"{user}.{kind}.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def password(self, user: str) -> str:
        return (self.datadir / "secrets" / f"{user}.password").read_text().strip()

    def tls(self, name: str) -> Path:
        return self.datadir / "tls" / name


def start_secure_broker() -> SecureBroker:
    """Start (or reuse) the secured broker of ops/kafka, holding a lease on it."""
    _acquire(secure=True)
    datadir = _kafka_sh("datadir", timeout=30, secure=True).stdout.strip()
    return SecureBroker(Path(datadir))


def release_secure_broker() -> None:
    _kafka_sh("release", timeout=120, secure=True)


def batch_hand_off_env() -> dict[str, str]:
    """`TEST_BATCH_HAND_OFF=0` runs the workers of the integration tests with faust's
    per-record loop (`LOOPWATCH_BATCH_HAND_OFF=false`; the batch hand-off is the default):
    the same suite over both paths."""
    if os.environ.get("TEST_BATCH_HAND_OFF") == "0":
        return {"LOOPWATCH_BATCH_HAND_OFF": "false"}
    return {}
