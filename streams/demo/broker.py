"""The demo's broker: the one KAFKA_BOOTSTRAP_SERVERS names, else the local broker of
ops/kafka, held with a lease (`kafka.sh acquire`/`release`): it is started when it is not
running and stopped at the end only when the demo started it and nobody else (tests, a
person's `make kafka-up`) still uses it."""

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
    leased: bool
    """True when the demo holds a lease on the local broker (and so must release it)."""

    def release(self) -> None:
        if self.leased:
            subprocess.run([str(KAFKA_SH), "release"], check=False, capture_output=True)


def ensure_broker() -> Broker:
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if configured:
        return Broker(configured, leased=False)
    if not KAFKA_SH.is_file():
        raise BrokerError(
            f"no local broker script at {KAFKA_SH}: set KAFKA_BOOTSTRAP_SERVERS to a broker"
        )
    local = f"127.0.0.1:{os.environ.get('KAFKA_PORT', '9092')}"
    status = subprocess.run([str(KAFKA_SH), "status"], check=False, capture_output=True)
    if status.returncode != 0:
        print(
            "starting the local Apache Kafka broker (ops/kafka/kafka.sh; the first start "
            "downloads its jars with Maven) ...",
            flush=True,
        )
    try:
        # The lease is keyed by this process (the script's parent).
        up = subprocess.run(
            [str(KAFKA_SH), "acquire"],
            check=False,
            capture_output=True,
            text=True,
            timeout=_UP_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired as exc:
        raise BrokerError(f"the local broker did not start within {_UP_TIMEOUT_SECONDS}s") from exc
    if up.returncode != 0:
        raise BrokerError(
            f"the local broker did not start (ops/kafka/kafka.sh acquire, exit {up.returncode}):\n"
            f"{up.stdout}{up.stderr}\nor set KAFKA_BOOTSTRAP_SERVERS to a broker"
        )
    return Broker(local, leased=True)
