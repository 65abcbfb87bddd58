"""A clock for code that takes one (`clock=`, `monotonic=`): seconds the test moves by hand."""

from __future__ import annotations


class ManualClock:
    """Returns `now`, which only the test changes."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
