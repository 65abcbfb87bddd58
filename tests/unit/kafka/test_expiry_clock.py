"""The idle sweep's clocks (`ExpiryIndex`, docs/contract.md §8.5): the log clock follows
the records' Kafka timestamps, never past the worker's clock and never back; a session's
deadlines count from the log clock and the worker's clock when it was last seen, never
from its event time, and it goes only once both have passed.

Property: over any interleaving of sessions whose records carry skewed timestamps (old,
far-future, missing) read at any pace, a session is swept exactly when it has had no
record for a TTL on both clocks, never earlier, and never later than the first record
after that."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.streams.kafka.expiry import ExpiryIndex

TTL = 3600.0
NOW = 1_800_000_000.0
DAY = 86_400.0


def _index() -> ExpiryIndex:
    return ExpiryIndex(timedelta(seconds=TTL), timedelta(seconds=60))


def test_the_clock_never_passes_the_worker_clock_nor_goes_back() -> None:
    index = _index()
    assert index.advance(0, NOW - DAY, NOW) == NOW - DAY
    assert index.advance(0, NOW + 7 * DAY, NOW) == NOW  # a producer a week ahead
    assert index.advance(0, NOW - 2 * DAY, NOW + 1) == NOW  # an old stamp moves nothing
    assert index.advance(0, None, NOW + 5) == NOW + 5  # no timestamp: the worker's clock
    assert index.clock(1) == float("-inf")  # per partition


def test_an_old_stamped_session_receiving_records_is_not_swept_by_fresh_traffic() -> None:
    index = _index()
    for second in range(0, 3 * int(TTL), 600):  # fresh traffic, and the old session between
        now = NOW + second
        seen = index.advance(0, now, now)
        index.touch_at(0, "fresh", seen, ended=False)
        seen = index.advance(0, now - 2 * DAY, now)  # its records are two days old
        index.touch_at(0, "old", seen, ended=False)
        assert index.due_at(0, seen) == []


def test_a_jump_of_the_log_clock_sweeps_nothing_read_moments_ago() -> None:
    """A producer whose clock lags by days, alone on a quiet partition, then one whose
    clock is right: the log clock jumps two days, but the worker read the lagging
    producer's sessions a second ago."""
    index = _index()
    seen = index.advance(0, NOW - 2 * DAY, NOW)
    index.touch_at(0, "lagging", seen, ended=False, wall=NOW)
    seen = index.advance(0, NOW + 1, NOW + 1)
    assert index.due_at(0, seen, NOW + 1) == []
    index.touch_at(0, "right", seen, ended=False, wall=NOW + 1)
    later = index.advance(0, NOW + TTL + 0.5, NOW + TTL + 0.5)
    assert index.due_at(0, later, NOW + TTL + 0.5) == ["lagging"]  # once idle on both


def test_a_backlog_after_an_outage_is_swept_by_its_own_gaps() -> None:
    """Restored after two days down: the worker's clock has passed every deadline, the
    log's has not: sessions whose next records are in the backlog stay."""
    index = _index()
    index.touch_at(0, "waiting", NOW, ended=False, wall=NOW)
    index.touch_at(0, "gone", NOW - 2 * TTL, ended=False, wall=NOW - 2 * TTL)
    back = NOW + 2 * DAY
    seen = index.advance(0, NOW + 60, back)  # the backlog's first record, a minute on
    assert index.due_at(0, seen, back) == ["gone"]


def test_a_far_future_record_expires_no_other_session_early() -> None:
    index = _index()
    index.touch_at(0, "quiet", index.advance(0, NOW, NOW), ended=False)
    seen = index.advance(0, NOW + 30 * DAY, NOW + 1)
    index.touch_at(0, "ahead", seen, ended=False)
    assert index.due_at(0, seen) == []
    later = index.advance(0, NOW + TTL + 0.5, NOW + TTL + 0.5)
    assert index.due_at(0, later) == ["quiet"]  # and a dead session still goes in time


Step = tuple[int, float | None, int]
"""(session, log time skew in seconds or None for no timestamp, seconds of wall time
since the previous record)."""


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=4),
            st.one_of(st.none(), st.floats(min_value=-10 * DAY, max_value=10 * DAY)),
            st.integers(min_value=0, max_value=int(TTL)),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_sessions_are_swept_exactly_when_idle_on_both_clocks(steps: list[Step]) -> None:
    index = _index()
    now = NOW
    last_seen: dict[str, tuple[float, float]] = {}
    for session, skew, elapsed in steps:
        now += elapsed
        seen = index.advance(0, None if skew is None else now + skew, now)
        assert seen <= now
        for due in index.due_at(0, seen, now):
            log, wall = last_seen.pop(due)
            assert seen - log > TTL and now - wall > TTL  # idle on both clocks
        # every session left has been seen within a TTL on one clock or the other
        assert all(seen - log <= TTL or now - wall <= TTL for log, wall in last_seen.values())
        name = f"s{session}"
        index.touch_at(0, name, seen, ended=False, wall=now)
        last_seen[name] = (seen, now)
    assert index.sessions() == len(last_seen)
