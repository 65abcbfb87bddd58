"""The client's one bounded buffer of events waiting for delivery (all sessions together).

Publishing appends and returns at once; the client's one background sender takes
batches from the front. When the buffer is full the *oldest* event is dropped and
counted (`stats.dropped`): the newest events are what the next verdict wait is about.
A batch the producer gave up on goes back to the front, in order.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from loopwatch.streams.client.stats import ClientStats

MAX_BATCH = 500
"""Events per delivery attempt (one batch in flight at a time)."""


@dataclass(slots=True)
class Outgoing:
    """One event waiting for delivery."""

    key: bytes
    record: bytes
    delivered: asyncio.Future[Any]
    """Resolved when the broker acknowledged it (never, when it is dropped)."""
    stamped: bool = False
    """Whether its reply partition was chosen (at its first delivery attempt)."""
    reply: int | None = None
    """The verdict partition its header names (None: no header)."""


class Outbox:
    """A bounded FIFO of events; drops the oldest when full."""

    def __init__(self, max_buffered: int, stats: ClientStats) -> None:
        if max_buffered < 1:
            raise ValueError("max_buffered must be at least 1")
        self.max_buffered = max_buffered
        self._stats = stats
        self._events: deque[Outgoing] = deque()
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._events)

    def append(self, event: Outgoing) -> None:
        self._events.append(event)
        self._trim()
        self._ready.set()

    def put_back(self, events: list[Outgoing]) -> None:
        """Return a batch that was not delivered to the front, in its order."""
        self._events.extendleft(reversed(events))
        self._trim()
        if self._events:
            self._ready.set()

    def take(self, limit: int = MAX_BATCH) -> list[Outgoing]:
        """Up to `limit` events from the front."""
        count = min(limit, len(self._events))
        batch = [self._events.popleft() for _ in range(count)]
        if not self._events:
            self._ready.clear()
        self._stats.buffered = len(self._events)
        return batch

    async def wait_ready(self) -> None:
        """Until the buffer holds an event."""
        await self._ready.wait()

    def drop_all(self) -> int:
        """Drop every event (the client closes); returns how many."""
        count = len(self._events)
        self._events.clear()
        self._ready.clear()
        self._stats.dropped += count
        self._stats.buffered = 0
        return count

    def _trim(self) -> None:
        while len(self._events) > self.max_buffered:
            self._events.popleft()
            self._stats.dropped += 1
        self._stats.buffered = len(self._events)
