"""How long the offset commits take: `loopwatch_commit_seconds`, in place of faust's
"Timer commit is overlapping" warnings.

Each commit writes the sessions changed since the last one and waits until every record
before it is acknowledged (`app._guard_commits`), while events go on being processed. In
a backlog that takes longer than the commit interval, and faust's commit timer (mode's
`Timer`) logged a WARNING at every such commit: ~50 in a backlog of 30,000 events
(docs/performance.md §4), none of them a fault, and an operator alerting on warnings was
paged for a worker catching up. The commits' durations go to the histogram instead, and
one INFO line a minute at most says how many ran past the interval and the longest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Histogram

COMMIT_TIMER = "commit"
"""The name faust gives its commit timer (`Consumer._commit_handler`)."""
_OVERLAP_MESSAGE = "Timer %s is overlapping"
SUMMARY_EVERY_SECONDS = 60.0
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

log = logging.getLogger("loopwatch.commits")


class CommitTiming:
    """Observes each commit's duration; says once a minute at most when commits ran
    longer than `interval` seconds (`clock`: seconds, monotonic; tests move it)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        interval: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self._clock = clock
        self.seconds = Histogram(
            "loopwatch_commit_seconds",
            "Seconds an offset commit spent before its request: writing the sessions "
            "changed since the last one and waiting for every record before it to be "
            "acknowledged. Above the commit interval while a backlog is processed (events "
            "go on meanwhile).",
            buckets=BUCKETS,
            registry=registry,
        )
        self._long = 0
        self._longest = 0.0
        self._summary_at = clock()
        self.warnings_dropped = 0
        """faust's overlap warnings of the commit timer not shown (`CommitOverlapFilter`)."""

    def observe(self, seconds: float) -> None:
        self.seconds.observe(seconds)
        if seconds > self.interval:
            self._long += 1
            self._longest = max(self._longest, seconds)
        now = self._clock()
        if now - self._summary_at >= SUMMARY_EVERY_SECONDS:
            if self._long:
                log.info(
                    "%d offset commits in the last %.0f s took longer than the %.1f s "
                    "interval (longest %.1f s): a backlog being processed, or a broker slow "
                    "to acknowledge (loopwatch_commit_seconds)",
                    self._long,
                    now - self._summary_at,
                    self.interval,
                    self._longest,
                )
            self._summary_at = now
            self._long, self._longest = 0, 0.0


class CommitOverlapFilter(logging.Filter):
    """On mode's timer logger: drops the commit timer's overlap warning (counted);
    every other record, the other timers' included, passes."""

    def __init__(self, timing: CommitTiming) -> None:
        super().__init__()
        self.timing = timing

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(record.msg, str)
            and record.msg.startswith(_OVERLAP_MESSAGE)
            and isinstance(args, tuple)
            and args[:1] == (COMMIT_TIMER,)
        ):
            self.timing.warnings_dropped += 1
            return False
        return True


def install(timing: CommitTiming) -> CommitOverlapFilter:
    """Put the filter on mode's timer logger, in place of an earlier app's (one process
    may build several apps: tests)."""
    logger = logging.getLogger("mode.timers")
    for old in [f for f in logger.filters if isinstance(f, CommitOverlapFilter)]:
        logger.removeFilter(old)
    log_filter = CommitOverlapFilter(timing)
    logger.addFilter(log_filter)
    return log_filter
