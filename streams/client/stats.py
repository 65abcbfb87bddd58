"""Counters of one client: what a runtime (and the demo's summary) reports."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from loopwatch.streams.client.breaker import CircuitStats

_WAITS_KEPT = 100_000  # recent verdict waits kept for percentiles


@dataclass
class ClientStats:
    """Counts since the client started."""

    published: int = 0
    """Events the broker acknowledged."""
    publish_errors: int = 0
    """Events of delivery attempts the producer gave up on (they go back to the buffer
    and are retried; counted per attempt)."""
    dropped: int = 0
    """Events never delivered: the oldest when the buffer was full, those that could not
    be encoded, and those left when the client closed."""
    buffered: int = 0
    """Events waiting for delivery now."""
    waits: int = 0
    """Verdict waits (skipped ones included)."""
    timeouts: int = 0
    """Verdict waits that gave up (fail-open)."""
    skipped_waits: int = 0
    """Verdict waits that returned at once because the circuit was open."""
    bad_records: int = 0
    """Records on the verdicts topic that did not decode (skipped)."""
    connected: bool = False
    """Whether the client is connected to Kafka now."""
    circuit: CircuitStats = field(default_factory=CircuitStats)
    """The circuit breaker's state and counts."""
    warnings: Counter[str] = field(default_factory=Counter)
    """Warnings received, by rule."""
    wait_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=_WAITS_KEPT))
    """Durations of recent verdict waits."""

    def record_wait(self, seconds: float, complete: bool) -> None:
        self.waits += 1
        self.timeouts += not complete
        self.wait_seconds.append(seconds)

    def record_skipped(self, seconds: float) -> None:
        """A wait that did not wait: the circuit was open."""
        self.waits += 1
        self.skipped_waits += 1
        self.wait_seconds.append(seconds)

    def wait_percentile(self, fraction: float) -> float | None:
        """The `fraction` (0-1) quantile of recent waits, nearest rank; None without any."""
        if not self.wait_seconds:
            return None
        ordered = sorted(self.wait_seconds)
        rank = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
        return ordered[rank]
