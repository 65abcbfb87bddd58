"""Offset commits' durations (streams.worker.commit_timing): `loopwatch_commit_seconds`, one
summary line a minute, and faust's commit-timer overlap warning dropped, driven through
mode's own `Timer` with a hand-moved clock."""

from __future__ import annotations

import logging

import pytest
from mode.timers import Timer
from prometheus_client import CollectorRegistry

from loopwatch.streams.worker.commit_timing import (
    SUMMARY_EVERY_SECONDS,
    CommitOverlapFilter,
    CommitTiming,
    install,
)
from tests.support.clocks import ManualClock


def overlap(name: str) -> None:
    """Run mode's timer named `name` (interval 0.5 s) through one iteration whose body
    takes 2 s: mode logs its overlap warning, as faust's commit timer does in a backlog."""
    clock = ManualClock()
    timer = Timer(0.5, name=name, clock=clock)
    timer.tick()  # the first wake-up
    clock.now += 0.5
    timer.on_before_yield()  # the body starts
    clock.now += 2.0
    timer.tick()  # and ran for 2 s


@pytest.fixture
def timing() -> CommitTiming:
    return CommitTiming(CollectorRegistry(), 0.5, clock=ManualClock())


def test_the_commit_timers_overlap_warning_is_dropped_and_other_timers_still_warn(
    timing: CommitTiming, caplog: pytest.LogCaptureFixture
) -> None:
    installed = install(timing)
    try:
        caplog.set_level(logging.WARNING, logger="mode.timers")
        overlap("commit")
        overlap("loopwatch.partition_lag")
    finally:
        logging.getLogger("mode.timers").removeFilter(installed)
    messages = [r.getMessage() for r in caplog.records if r.name == "mode.timers"]
    assert len(messages) == 1, messages
    assert messages[0].startswith("Timer loopwatch.partition_lag is overlapping")
    assert timing.warnings_dropped == 1
    overlap("commit")  # the filter removed: mode's warning is back
    assert any(r.getMessage().startswith("Timer commit is overlapping") for r in caplog.records)


def test_installing_again_replaces_the_filter(timing: CommitTiming) -> None:
    logger = logging.getLogger("mode.timers")
    first = install(timing)
    second = install(CommitTiming(CollectorRegistry(), 1.0))
    try:
        assert [f for f in logger.filters if isinstance(f, CommitOverlapFilter)] == [second]
        assert first not in logger.filters
    finally:
        logger.removeFilter(second)


def test_durations_go_to_the_histogram_and_long_ones_to_a_line_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, registry = ManualClock(), CollectorRegistry()
    timing = CommitTiming(registry, 0.5, clock=clock)
    caplog.set_level(logging.INFO, logger="loopwatch.commits")
    for seconds in (0.2, 1.5, 3.0):
        clock.now += 10
        timing.observe(seconds)
    assert not caplog.records, "nothing before a minute has passed"
    clock.now += SUMMARY_EVERY_SECONDS
    timing.observe(0.1)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("2 offset commits in the last 90 s took longer than the 0.5 s")
    assert "longest 3.0 s" in line
    assert registry.get_sample_value("loopwatch_commit_seconds_count") == 4
    assert registry.get_sample_value("loopwatch_commit_seconds_sum") == pytest.approx(4.8)
    assert registry.get_sample_value("loopwatch_commit_seconds_bucket", {"le": "0.5"}) == 2
    # the next minute had no long commit: no line
    clock.now += SUMMARY_EVERY_SECONDS
    timing.observe(0.2)
    assert len(caplog.records) == 1
