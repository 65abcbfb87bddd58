"""Ports for the processes loopwatch starts: free, adjacent, below the ephemeral range."""

from __future__ import annotations

import socket

from loopwatch.streams.demo.ports import HIGH, LOW, free_ports


def test_free_ports_are_adjacent_bindable_and_below_the_ephemeral_range() -> None:
    first = free_ports(2)
    assert LOW <= first < first + 1 < HIGH
    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", first))
        b.bind(("127.0.0.1", first + 1))


def test_a_taken_port_is_never_handed_out() -> None:
    taken = []
    try:
        for _ in range(20):
            sock = socket.socket()
            sock.bind(("127.0.0.1", free_ports(1)))
            taken.append(sock)
        ports = {s.getsockname()[1] for s in taken}
        assert len(ports) == len(taken)  # each was free when handed out
    finally:
        for sock in taken:
            sock.close()
