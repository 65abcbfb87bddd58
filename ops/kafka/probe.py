"""Is a Kafka broker serving clients? One Metadata request, with the Python standard library.

`kafka.sh` runs this before the project's venv exists, so it needs no aiokafka. An open
port is not enough: a KRaft broker accepts connections before it is unfenced, and only an
unfenced broker is listed in a Metadata response.

    python3 probe.py HOST:PORT [--deadline SECONDS] [--pid PID]
                     [--cafile CA --certfile CERT --keyfile KEY]   (a TLS listener)
        exit 0 once ready; 1 at the deadline, or at once if process PID has exited
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import struct
import sys
import time

METADATA_API_KEY = 3
# v1: the oldest version with a nullable topic list that Kafka 4.x still serves;
# an empty list asks for brokers only.
METADATA_VERSION = 1
CLIENT_ID = b"loopwatch-probe"


def _metadata_request(correlation_id: int) -> bytes:
    header = struct.pack(
        ">hhih", METADATA_API_KEY, METADATA_VERSION, correlation_id, len(CLIENT_ID)
    )
    body = struct.pack(">i", 0)  # no topics
    payload = header + CLIENT_ID + body
    return struct.pack(">i", len(payload)) + payload


def _read_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def live_brokers(host: str, port: int, timeout: float, tls: ssl.SSLContext | None = None) -> int:
    """How many brokers the one at host:port reports as serving (0 while still fenced)."""
    with socket.create_connection((host, port), timeout=timeout) as raw:
        sock = raw if tls is None else tls.wrap_socket(raw, server_hostname=host)
        sock.settimeout(timeout)
        sock.sendall(_metadata_request(correlation_id=1))
        (size,) = struct.unpack(">i", _read_exact(sock, 4))
        response = _read_exact(sock, size)
    correlation_id, broker_count = struct.unpack_from(">ii", response, 0)
    if correlation_id != 1:
        raise ConnectionError(f"unexpected correlation id {correlation_id}")
    return int(broker_count)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) still answers kill(0)
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address", help="HOST:PORT of the broker")
    parser.add_argument("--deadline", type=float, default=0.0, help="seconds to keep trying")
    parser.add_argument("--pid", type=int, help="give up as soon as this process has exited")
    parser.add_argument("--cafile", help="TLS: the CA of the broker's certificate")
    parser.add_argument("--certfile", help="TLS: the client certificate (mTLS)")
    parser.add_argument("--keyfile", help="TLS: the client certificate's key")
    args = parser.parse_args(argv)
    tls = None
    if args.cafile:
        tls = ssl.create_default_context(cafile=args.cafile)
        if args.certfile:
            tls.load_cert_chain(args.certfile, args.keyfile)
    host, _, port = args.address.rpartition(":")
    give_up_at = time.monotonic() + args.deadline
    last_error = "no answer"
    while True:
        try:
            if live_brokers(host, int(port), timeout=2.0, tls=tls) > 0:
                return 0
            last_error = "the broker lists no live brokers yet (still starting)"
        except (OSError, ConnectionError, struct.error) as exc:
            last_error = f"{type(exc).__name__}: {exc}"
        if args.pid is not None and not _alive(args.pid):
            print(f"probe: the broker process {args.pid} has exited", file=sys.stderr)
            return 1
        if time.monotonic() >= give_up_at:
            print(f"probe: {args.address} not ready: {last_error}", file=sys.stderr)
            return 1
        time.sleep(0.2)  # polling interval of a deadline loop, not synchronisation


if __name__ == "__main__":
    sys.exit(main())
