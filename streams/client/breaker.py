"""The client's circuit breaker: stop waiting for verdicts that do not come (docs/client.md).

Pure (no I/O, no event loop): the client and its sessions report what happened, the
breaker says whether a verdict wait may wait at all. The same semantics as the
TypeScript client (clients/typescript/README.md, "Fail-open and the circuit breaker"):

* it counts *consecutive failures*: a verdict wait that timed out, a failed connection
  attempt, a failed delivery attempt. A wait that got its verdict resets the count (also
  when the verdict was already there); a verdict that arrives after its wait gave up does
  not, so a worker that answers but too late still opens the circuit;
* **closed** (the start): waits wait. After `failure_threshold` (K) consecutive failures
  the circuit **opens**;
* **open**: waits return at once (skipped); failures are not counted;
* **open → closed**: the first verdict that arrives, for any session, once the circuit
  has been open for at least `probe_interval` seconds. The count restarts at 0.

There is no half-open state with trial waits: while open, no agent call ever waits.
Each transition is logged once, when it happens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger(__name__)

CircuitState = Literal["closed", "open"]
FailureKind = Literal["timeout", "connect", "publish"]


@dataclass
class CircuitStats:
    """The breaker's state and counts (`client.stats.circuit`)."""

    state: CircuitState = "closed"
    consecutive_failures: int = 0
    failure_threshold: int = 3
    opens: int = 0
    """Times the circuit opened."""
    closes: int = 0
    """Times it closed again (verdicts flowed)."""
    last_opened_by: FailureKind | None = None
    """The failure that last opened it."""
    changed_at: float | None = None
    """When the state last changed (seconds since the epoch; None: never)."""


class CircuitBreaker:
    """Counts consecutive failures; opens after K; closes on a verdict after a probe
    interval."""

    def __init__(
        self,
        failure_threshold: int = 3,
        probe_interval: float = 2.0,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        self.probe_interval = probe_interval
        self.stats = CircuitStats(failure_threshold=failure_threshold)
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._opened_at = 0.0
        self.listeners: list[Callable[[CircuitStats], None]] = []
        """Called after each transition, with the stats (e.g. to await a state)."""

    @property
    def is_open(self) -> bool:
        return self.stats.state == "open"

    def failure(self, kind: FailureKind) -> None:
        """A verdict wait timed out, a connection or a delivery attempt failed."""
        stats = self.stats
        if stats.state == "open":
            return  # the probe: failures are not counted while open
        stats.consecutive_failures += 1
        if stats.consecutive_failures >= stats.failure_threshold:
            stats.state = "open"
            stats.opens += 1
            stats.last_opened_by = kind
            stats.changed_at = self._wall_clock()
            self._opened_at = self._monotonic()
            self._changed()
            log.warning(
                "loopwatch circuit open after %d consecutive failures (last: %s); model "
                "calls no longer wait for verdicts, events are still published "
                "best-effort; probing every %.1fs",
                stats.consecutive_failures,
                kind,
                self.probe_interval,
            )

    def wait_succeeded(self) -> None:
        """A verdict wait got its verdict (in time, or it was already there)."""
        if self.stats.state == "closed":
            self.stats.consecutive_failures = 0

    def verdict_arrived(self) -> None:
        """Any verdict of any session of the client arrived (the probe's success)."""
        stats = self.stats
        if stats.state != "open":
            return
        if self._monotonic() - self._opened_at < self.probe_interval:
            return  # merely late, right after the circuit opened
        stats.state = "closed"
        stats.consecutive_failures = 0
        stats.closes += 1
        stats.changed_at = self._wall_clock()
        self._changed()
        log.warning(
            "loopwatch circuit closed: verdicts flow again; model calls wait for them "
            "(after %d opens)",
            stats.opens,
        )

    def _changed(self) -> None:
        for listener in list(self.listeners):
            try:
                listener(self.stats)
            except Exception as exc:  # a listener's bug must not reach the agent's call
                log.warning("circuit listener failed: %s", type(exc).__name__)
