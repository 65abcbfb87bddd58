"""The worker's fetches wait a few milliseconds for more records while records keep coming.

aiokafka asks the broker for `fetch_min_bytes=1`: the broker answers a fetch as soon as
one record is there. Under a steady paced load (1,000 events/s from 500 agents) each
fetch then brings one or two events, and the worker pays a fetch per event: the request
built and the response parsed in Python, a loopback write that wakes the broker, and the
broker's own work, on the same two cores as everything else (docs/performance.md, "The
adaptive fetch wait"). Kafka's answer is `fetch.min.bytes` with a short
`fetch.max.wait.ms`: the broker holds the fetch until that many bytes or that wait.

A fixed short wait would cost an idle worker a fetch every few milliseconds (3,366 in
10 idle seconds with 2 ms, 0.16 of a core, against 7), so the wait adapts, as the
outputs' linger does (`streams.kafka.outputs`): after a fetch that brought records the next
one asks for `BUSY_MIN_BYTES` within `wait_ms`; after one that brought none it asks as
before (1 byte, faust's long poll), so an idle worker stays idle and a record that comes
alone goes at once.

Off by default (`LOOPWATCH_FETCH_WAIT_MS=0`): the broker's wait starts when the fetch
arrives, not with the first record, so a record that comes just after a fetch waits the
whole wait: it trades worker CPU for wait per model call (the figures: docs/performance.md,
"The adaptive fetch wait").

The wait is one for all the brokers a worker fetches from (aiokafka builds each node's
request from the same two values): with several, the last response sets the next
request's mode, which at worst batches a fetch that need not be, or not one that could.
"""

from __future__ import annotations

from typing import Any

from aiokafka.consumer.fetcher import Fetcher

BUSY_MIN_BYTES = 4096
"""What a fetch asks for while records keep coming: a few events' worth (events are
~0.3-1 KB), so a backlog still returns at once and a paced load waits the short wait."""


class AdaptiveFetcher(Fetcher):  # type: ignore[misc]
    """aiokafka's fetcher whose next request waits `busy_wait_ms` for `BUSY_MIN_BYTES`
    after a response with records, and the constructor's values after one without."""

    busy_wait_ms: int
    idle_request: tuple[int, int]

    async def _proc_fetch_request(self, assignment: Any, node_id: int, request: Any) -> bool:
        # True when records (or an error to hand out) were added from the response
        brought: bool = await super()._proc_fetch_request(assignment, node_id, request)
        if brought:
            self._fetch_min_bytes, self._fetch_max_wait_ms = BUSY_MIN_BYTES, self.busy_wait_ms
        else:
            self._fetch_min_bytes, self._fetch_max_wait_ms = self.idle_request
        return brought


def adapt_fetch_wait(consumer: Any, wait_ms: int) -> None:
    """Make the started aiokafka `consumer`'s fetcher an `AdaptiveFetcher` waiting up to
    `wait_ms` while records keep coming (0: leave it as it is)."""
    if wait_ms <= 0:
        return
    fetcher = consumer._fetcher
    # aiokafka builds its Fetcher itself in `start()`: the class is changed in place (the
    # subclass adds no state of its own beyond these two attributes)
    fetcher.idle_request = (fetcher._fetch_min_bytes, fetcher._fetch_max_wait_ms)
    fetcher.busy_wait_ms = wait_ms
    fetcher.__class__ = AdaptiveFetcher
