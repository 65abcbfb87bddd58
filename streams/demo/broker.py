"""The demo's broker: the one KAFKA_BOOTSTRAP_SERVERS names, else the local broker of
ops/kafka (started when it is not running, and then stopped again at the end)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

KAFKA_SH = Path(__file__).resolve().parents[2] / "ops" / "kafka" / "kafka.sh"
_UP_TIMEOUT_SECONDS = 600  # the first start downloads the broker's jars with Maven


class BrokerError(RuntimeError):
    """No broker; the message says what to do."""


@dataclass(frozen=True)
class Broker:
    bootstrap_servers: str
    started_here: bool
    """True when the demo started the local broker (and so should stop it)."""

    def stop(self) -> None:
        if self.started_here:
            subprocess.run([str(KAFKA_SH), "down"], check=False, capture_output=True)


def ensure_broker() -> Broker:
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if configured:
        return Broker(configured, started_here=False)
    if not KAFKA_SH.is_file():
        raise BrokerError(
            f"no local broker script at {KAFKA_SH}: set KAFKA_BOOTSTRAP_SERVERS to a broker"
        )
    local = f"127.0.0.1:{os.environ.get('KAFKA_PORT', '9092')}"
    status = subprocess.run([str(KAFKA_SH), "status"], check=False, capture_output=True)
    if status.returncode == 0:
        return Broker(local, started_here=False)
    print("starting the local Apache Kafka broker (ops/kafka/kafka.sh up) ...", flush=True)
    try:
        up = subprocess.run(
            [str(KAFKA_SH), "up"],
            check=False,
            capture_output=True,
            text=True,
            timeout=_UP_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired as exc:
        raise BrokerError(f"the local broker did not start within {_UP_TIMEOUT_SECONDS}s") from exc
    if up.returncode != 0:
        raise BrokerError(
            f"the local broker did not start (ops/kafka/kafka.sh up, exit {up.returncode}):\n"
            f"{up.stdout}{up.stderr}\nor set KAFKA_BOOTSTRAP_SERVERS to a broker"
        )
    return Broker(local, started_here=True)
