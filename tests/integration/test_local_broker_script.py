"""ops/kafka/kafka.sh on its own port and data directory: up, idempotent up, status, down."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from loopwatch.streams.demo.ports import free_ports
from tests.support.kafka_broker import KAFKA_SH

pytestmark = pytest.mark.kafka


def kafka_sh(
    *args: str, data: Path, port: int, lease: int | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKA_DATA_DIR": str(data), "KAFKA_PORT": str(port)}
    if lease is not None:
        env["LOOPWATCH_KAFKA_LEASE"] = str(lease)
    return subprocess.run(
        [str(KAFKA_SH), *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"


def test_up_is_idempotent_and_down_stops_the_process(kafka_bootstrap: str, tmp_path: Path) -> None:
    # kafka_bootstrap: the jars are fetched by then, so this start is a warm one
    port = free_ports(2)
    data = tmp_path / "broker"

    first = kafka_sh("up", data=data, port=port)
    try:
        assert first.returncode == 0, first.stdout + first.stderr
        pid = int((data / "kafka.pid").read_text())
        assert pid_alive(pid)
        assert (data / "logs" / "server.log").exists()

        again = kafka_sh("up", data=data, port=port)
        assert again.returncode == 0
        assert f"already up on 127.0.0.1:{port} (pid {pid})" in again.stdout
        assert kafka_sh("status", data=data, port=port).returncode == 0
    finally:
        down = kafka_sh("down", data=data, port=port)
    assert down.returncode == 0
    assert not pid_alive(pid)
    assert not (data / "kafka.pid").exists()
    assert kafka_sh("status", data=data, port=port).returncode == 1


def test_up_refuses_a_port_someone_else_holds(kafka_bootstrap: str, tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = int(squatter.getsockname()[1])

        result = kafka_sh("up", data=tmp_path / "broker", port=port)

    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert not (tmp_path / "broker" / "kafka.pid").exists()


@contextmanager
def live_process() -> Iterator[int]:
    """The PID of a process that lives until the block ends (a stand-in lease holder)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        yield holder.pid
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_the_last_lease_holder_out_stops_the_broker(kafka_bootstrap: str, tmp_path: Path) -> None:
    port, data = free_ports(2), tmp_path / "broker"
    with live_process() as first, live_process() as second:
        try:
            assert kafka_sh("acquire", data=data, port=port, lease=first).returncode == 0
            pid = int((data / "kafka.pid").read_text())
            assert kafka_sh("acquire", data=data, port=port, lease=second).returncode == 0

            released = kafka_sh("release", data=data, port=port, lease=first)
            assert f"lease {second} still holds it" in released.stdout
            assert pid_alive(pid)
        finally:
            last = kafka_sh("release", data=data, port=port, lease=second)
    assert last.returncode == 0
    assert not pid_alive(pid)


def test_a_broker_started_by_hand_outlives_the_leases(kafka_bootstrap: str, tmp_path: Path) -> None:
    port, data = free_ports(2), tmp_path / "broker"
    with live_process() as holder:
        try:
            assert kafka_sh("acquire", data=data, port=port, lease=holder).returncode == 0
            pid = int((data / "kafka.pid").read_text())
            # a person runs `make kafka-up` meanwhile: the broker is now theirs
            assert kafka_sh("up", data=data, port=port).returncode == 0

            released = kafka_sh("release", data=data, port=port, lease=holder)
            assert "left running" in released.stdout
            assert pid_alive(pid)
        finally:
            kafka_sh("down", data=data, port=port)
    assert not pid_alive(pid)
