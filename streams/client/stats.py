"""Counters of one client: what a runtime (and the demo's summary) reports."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

_WAITS_KEPT = 100_000  # recent verdict waits kept for percentiles


@dataclass
class ClientStats:
    """Counts since the client started."""

    published: int = 0
    """Events handed to the producer."""
    publish_errors: int = 0
    """Events that could not be published (detection skipped them; the turn went on)."""
    waits: int = 0
    """Verdict waits."""
    timeouts: int = 0
    """Verdict waits that gave up (fail-open)."""
    warnings: Counter[str] = field(default_factory=Counter)
    """Warnings received, by rule."""
    wait_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=_WAITS_KEPT))
    """Durations of recent verdict waits."""

    def record_wait(self, seconds: float, complete: bool) -> None:
        self.waits += 1
        self.timeouts += not complete
        self.wait_seconds.append(seconds)

    def wait_percentile(self, fraction: float) -> float | None:
        """The `fraction` (0-1) quantile of recent waits, nearest rank; None without any."""
        if not self.wait_seconds:
            return None
        ordered = sorted(self.wait_seconds)
        rank = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
        return ordered[rank]
