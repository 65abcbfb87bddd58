"""Free local TCP ports for the processes loopwatch starts itself (the demo's private
broker and worker, and the tests').

A port the OS hands out for port 0 lies in the ephemeral range (32768-60999 on Linux),
from which every outgoing connection also takes its local port: with Kafka clients
opening connections all the time, such a port was now and then taken by one between the
check and the child process binding it. These are picked at random below that range.
"""

from __future__ import annotations

import random
import socket

LOW, HIGH = 20000, 32700
"""Where ports are picked: below Linux's default ephemeral range."""


def free_ports(count: int = 1) -> int:
    """A port p such that p .. p + count - 1 are all free to bind on 127.0.0.1 now."""
    for _attempt in range(200):
        first = random.randrange(LOW, HIGH - count)
        if all(_is_free(first + n) for n in range(count)):
            return first
    raise RuntimeError(f"found no {count} adjacent free ports in {LOW}-{HIGH}")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
