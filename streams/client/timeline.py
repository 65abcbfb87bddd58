"""Where a verdict wait's time went: the timestamps of one event's round trip.

All times are seconds since the epoch on the clocks of the client and the worker (the
same clock when they share a host; otherwise only the client's own segments compare).
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VerdictTimeline:
    """The round trip of the event a wait was for, from publish to the wait's return."""

    published_at: float
    """The event was handed to the producer."""
    acked_at: float | None
    """The broker acknowledged it (None: not yet when the wait returned)."""
    evaluated_at: float
    """The worker evaluated it (the verdict's `evaluated_at`)."""
    produced_at: float | None
    """The worker's producer put the verdict into a batch (the record's timestamp, ms)."""
    received_at: float
    """The verdict reached this client's reader."""
    returned_at: float
    """The wait returned it to the caller."""

    def segments(self) -> dict[str, float | None]:
        """Durations in seconds: publish ack, to evaluation, linger, to receipt, to return.

        `to_evaluation` runs from the publish (the ack may come after the evaluation);
        `linger` is evaluation to the verdict's batch (the worker's output linger)."""
        acked = None if self.acked_at is None else self.acked_at - self.published_at
        produced = self.produced_at
        return {
            "publish_ack": acked,
            "to_evaluation": self.evaluated_at - self.published_at,
            "linger": None if produced is None else produced - self.evaluated_at,
            "to_receipt": self.received_at - (self.evaluated_at if produced is None else produced),
            "to_return": self.returned_at - self.received_at,
            "total": self.returned_at - self.published_at,
        }


class PendingEvent:
    """An event published and not yet answered: when it left, when the broker took it."""

    __slots__ = ("acked_at", "published_at")

    def __init__(self) -> None:
        self.published_at = time.time()
        self.acked_at: float | None = None

    def acked(self) -> None:
        self.acked_at = time.time()


@dataclass(frozen=True, slots=True)
class Arrival:
    """The newest verdict received, with the event's publish times."""

    seq: int
    pending: PendingEvent | None
    evaluated_at: float
    produced_at: float | None
    received_at: float

    def timeline(self, returned_at: float) -> VerdictTimeline | None:
        if self.pending is None:
            return None
        return VerdictTimeline(
            published_at=self.pending.published_at,
            acked_at=self.pending.acked_at,
            evaluated_at=self.evaluated_at,
            produced_at=self.produced_at,
            received_at=self.received_at,
            returned_at=returned_at,
        )
