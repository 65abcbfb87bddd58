"""The demo's broker: the one the user names (`--bootstrap`, else KAFKA_BOOTSTRAP_SERVERS),
else a private broker of ops/kafka on a free port, with its data in the demo's work
directory, held with a lease (`kafka.sh acquire`/`release`) and stopped at the end.

A demo never attaches to a broker nobody told it about: on a laptop next to a real
deployment, localhost:9092 may be that deployment."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from loopwatch.streams.demo.ports import free_ports

KAFKA_SH = Path(__file__).resolve().parents[2] / "ops" / "kafka" / "kafka.sh"
_UP_TIMEOUT_SECONDS = 600  # the first start downloads the broker's jars with Maven


class BrokerError(RuntimeError):
    """No broker; the message says what to do."""


@dataclass(frozen=True)
class Broker:
    bootstrap_servers: str
    private_port: int | None = None
    """The port of the demo's own broker (None: the user's broker)."""
    data_dir: Path | None = None

    @property
    def private(self) -> bool:
        return self.private_port is not None

    def _env(self) -> dict[str, str]:
        return {**os.environ, "KAFKA_DATA_DIR": str(self.data_dir)}

    def release(self) -> None:
        """Stop the demo's own broker (a user's broker is left alone)."""
        if self.private_port is not None:
            subprocess.run(
                [str(KAFKA_SH), "--port", str(self.private_port), "release"],
                check=False,
                capture_output=True,
                env=self._env(),
            )

    def stop_command(self) -> str:
        return f"KAFKA_DATA_DIR={self.data_dir} {KAFKA_SH} --port {self.private_port} down"


def _free_port_pair() -> int:
    # The private broker needs two ports: its listener and its KRaft controller (+1).
    try:
        return free_ports(2)
    except RuntimeError as exc:
        raise BrokerError(f"{exc} for the demo's broker") from exc


def ensure_broker(bootstrap: str | None, data_dir: Path) -> Broker:
    """The user's broker when named, else a private one started under `data_dir`."""
    configured = (bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "")).strip()
    if configured:
        return Broker(configured)
    if not KAFKA_SH.is_file():
        raise BrokerError(
            f"no local broker script at {KAFKA_SH} (only a checkout of the loopwatch "
            "repository has one): pass --bootstrap HOST:PORT (or set "
            "KAFKA_BOOTSTRAP_SERVERS) to use a running broker, e.g. one started with "
            "`docker run -d -p 9092:9092 apache/kafka:4.1.2`"
        )
    port = _free_port_pair()
    broker = Broker(f"127.0.0.1:{port}", private_port=port, data_dir=data_dir)
    print(
        f"starting a private Apache Kafka broker on 127.0.0.1:{port} (ops/kafka/kafka.sh; "
        "the first start downloads its jars with Maven; --bootstrap uses a running one) ...",
        flush=True,
    )
    try:
        # The lease is keyed by this process (the script's parent).
        up = subprocess.run(
            [str(KAFKA_SH), "--port", str(port), "acquire"],
            check=False,
            capture_output=True,
            text=True,
            timeout=_UP_TIMEOUT_SECONDS,
            env=broker._env(),
        )
    except subprocess.TimeoutExpired as exc:
        broker.release()
        raise BrokerError(f"the demo's broker did not start within {_UP_TIMEOUT_SECONDS}s") from exc
    if up.returncode != 0:
        broker.release()
        raise BrokerError(
            f"the demo's broker did not start (ops/kafka/kafka.sh acquire, exit "
            f"{up.returncode}):\n{up.stdout}{up.stderr}\nor pass --bootstrap HOST:PORT"
        )
    return broker
