"""The idle sweep's log clock (`ExpiryIndex.advance`, docs/contract.md §8.5): it follows
the records' Kafka timestamps, never past the worker's clock and never back, and a
session's deadline counts from the clock when it was last seen, not from its event time.

Property: over any interleaving of sessions whose records carry skewed timestamps (old,
far-future, missing), a session that receives a record at least every TTL of log time is
never swept, and a session that stops is swept once the log clock has moved a TTL past
its last record (never later, whatever other records carry)."""

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


def test_a_far_future_record_expires_no_other_session_early() -> None:
    index = _index()
    index.touch_at(0, "quiet", index.advance(0, NOW, NOW), ended=False)
    seen = index.advance(0, NOW + 30 * DAY, NOW + 1)
    index.touch_at(0, "ahead", seen, ended=False)
    assert index.due_at(0, seen) == []
    later = index.advance(0, NOW + TTL + 0.5, NOW + TTL + 0.5)
    assert index.due_at(0, later) == ["quiet"]  # and a dead session still goes in time


Step = tuple[int, float | None, int]
"""(session, log time skew in seconds or None for no timestamp, seconds of wall time)."""


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
def test_sessions_are_swept_exactly_when_idle_on_the_log_clock(steps: list[Step]) -> None:
    index = _index()
    now = NOW
    last_seen: dict[str, float] = {}
    swept: set[str] = set()
    for session, skew, elapsed in steps:
        now += elapsed
        name = f"s{session}"
        seen = index.advance(0, None if skew is None else now + skew, now)
        assert seen <= now
        for due in index.due_at(0, seen):
            swept.add(due)
            # only sessions idle for a TTL on the log clock go
            assert seen - last_seen.pop(due) > TTL
        # every session left is younger than a TTL on the log clock
        assert all(seen - at <= TTL for at in last_seen.values())
        index.touch_at(0, name, seen, ended=False)
        last_seen[name] = seen
        swept.discard(name)
    assert index.sessions() == len(last_seen)
