"""What one request/response round trip over loopback TCP costs on this machine: the
floor under every Kafka request the worker, the client and the broker exchange.

    .venv/bin/python ops/bench/loopback_bench.py [--round-trips 20000] [--bytes 300]

Two processes on 127.0.0.1 (TCP_NODELAY, as Kafka clients set it): one sends a message
and waits for the other to echo it, again and again. Printed: wall time per round trip,
and the sender's CPU per round trip (its send, its receive, and the kernel's loopback
delivery, which runs in the sender's context), with the machine's steal over the run.
On a virtual machine each wake-up of the other process can cost more than the bytes.
Benchmarks print; tests never time.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from core_bench import machine  # noqa: E402
from harness import machine_ticks  # noqa: E402


def echo(port: int) -> None:
    """The other end: echo every message until the sender closes."""
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(65536):
        conn.sendall(data)
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Loopback TCP round trips.")
    parser.add_argument("--round-trips", type=int, default=20_000)
    parser.add_argument("--bytes", type=int, default=300, help="message size")
    args = parser.parse_args(argv)
    print(f"loopback_bench  {time.strftime('%Y-%m-%d %H:%M %Z')}  {machine()}")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    child = os.fork()
    if child == 0:
        echo(port)
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    message = b"x" * args.bytes
    for _ in range(1_000):  # warm-up
        conn.sendall(message)
        conn.recv(65536)
    steal, cpu, wall = machine_ticks()[1], time.process_time(), time.perf_counter()
    for _ in range(args.round_trips):
        conn.sendall(message)
        received = 0
        while received < args.bytes:
            chunk = conn.recv(65536)
            if not chunk:
                raise SystemExit("loopback_bench: the echoing process went away")
            received += len(chunk)
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    stolen = (machine_ticks()[1] - steal) / os.sysconf("SC_CLK_TCK") / wall
    conn.close()
    os.waitpid(child, 0)
    n = args.round_trips
    print(
        f"{n:,} round trips of {args.bytes} bytes: {wall / n * 1e6:.1f} us wall each, "
        f"sender CPU {cpu / n * 1e6:.1f} us each; host steal {stolen:.2f} cores"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
