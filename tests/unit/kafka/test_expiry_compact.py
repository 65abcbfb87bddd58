"""The compact `ExpiryIndex` (one shared tuple per touch, `is` for staleness) decides as
the index it replaced (a deadline pair in the dict, a triple in the heap, `==` for
staleness), kept here as the reference: the same sessions due, in the same order, on any
sequence of touches, forgets and sweeps over both clocks."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.streams.kafka.expiry import ExpiryIndex

TTL, ENDED = 10.0, 3.0


@dataclass
class _Reference:
    """The index before the compact one (67cb17d), without a limit (all due at once)."""

    deadlines: dict[str, tuple[float, float]] = field(default_factory=dict)
    heap: list[tuple[float, float, str]] = field(default_factory=list)
    waiting: list[tuple[float, float, str]] = field(default_factory=list)
    clock: float = float("-inf")
    wall: float = float("-inf")
    exists: bool = False
    """A partition exists from its first touch: a sweep before it moves no clock."""

    def touch_at(self, session_id: str, last: float, ended: bool, wall: float | None) -> None:
        self.exists = True
        self.clock = max(self.clock, last)
        span = ENDED if ended else TTL
        deadline = last + span
        wall_deadline = float("-inf") if wall is None else wall + span
        self.deadlines[session_id] = (deadline, wall_deadline)
        heapq.heappush(self.heap, (deadline, wall_deadline, session_id))
        if len(self.heap) > 2 * len(self.deadlines) + 1024:
            self.heap = [(d, w, s) for s, (d, w) in self.deadlines.items()]
            heapq.heapify(self.heap)
            self.waiting = []

    def due_at(self, now: float, wall: float) -> list[str]:
        if not self.exists:
            return []
        self.clock = max(self.clock, now)
        self.wall = max(self.wall, wall)
        while self.heap and self.heap[0][0] < self.clock:
            deadline, wall_deadline, session_id = heapq.heappop(self.heap)
            if self.deadlines.get(session_id) == (deadline, wall_deadline):
                heapq.heappush(self.waiting, (wall_deadline, deadline, session_id))
        expired = []
        while self.waiting and self.waiting[0][0] < self.wall:
            wall_deadline, deadline, session_id = heapq.heappop(self.waiting)
            if self.deadlines.get(session_id) == (deadline, wall_deadline):
                del self.deadlines[session_id]
                expired.append(session_id)
        return expired


_SESSIONS = st.sampled_from([f"s{n}" for n in range(8)])
_TIMES = st.integers(0, 60).map(float)  # coarse: equal deadlines and ties happen
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("touch"), _SESSIONS, _TIMES, st.booleans(), st.none() | _TIMES),
        st.tuples(st.just("forget"), _SESSIONS),
        st.tuples(st.just("due"), _TIMES, _TIMES),
    ),
    max_size=80,
)


def _apply_change(index: ExpiryIndex, reference: _Reference, step: tuple) -> bool:
    """A touch or a forget applied to both; False for a sweep step (the test's own)."""
    if step[0] == "touch":
        _, session, last, ended, wall = step
        # a new str per event, as decoded events bring them
        index.touch_at(0, "".join(session), last, ended=ended, wall=wall)
        reference.touch_at(session, last, ended, wall)
        return True
    if step[0] == "forget":
        index.forget(0, step[1])
        reference.deadlines.pop(step[1], None)
        return True
    return False


@settings(max_examples=400, deadline=None)
@given(_STEPS)
def test_the_compact_index_sweeps_as_the_reference_one(steps: list[tuple]) -> None:
    index = ExpiryIndex(timedelta(seconds=TTL), timedelta(seconds=ENDED))
    reference = _Reference()
    for step in steps:
        if not _apply_change(index, reference, step):
            _, now, wall = step
            assert index.due_at(0, now, wall) == reference.due_at(now, wall)
        assert index.sessions() == len(reference.deadlines)
    final = reference.due_at(float("inf"), float("inf"))
    assert sorted(index.due_at(0, float("inf"), float("inf"))) == sorted(final)


@settings(max_examples=200, deadline=None)
@given(_STEPS, st.integers(1, 3))
def test_limited_sweeps_take_the_same_sessions_as_the_reference(
    steps: list[tuple], limit: int
) -> None:
    index = ExpiryIndex(timedelta(seconds=TTL), timedelta(seconds=ENDED))
    reference = _Reference()
    for step in steps:
        if not _apply_change(index, reference, step):
            _, now, wall = step
            taken = index.due_at(0, now, wall, limit=limit)
            assert len(taken) <= limit
            while 0 in index.carried_over():
                more = index.due_again(0, limit)
                assert len(more) <= limit
                taken += more
            assert sorted(taken) == sorted(reference.due_at(now, wall))


def test_a_retouched_session_keeps_one_id_object_and_its_stale_entries_share_it() -> None:
    index = ExpiryIndex(timedelta(seconds=TTL), timedelta(seconds=ENDED))
    first = "".join(["sess", "ion"])
    index.touch_at(0, first, 1.0, ended=False, wall=1.0)
    for t in (2.0, 3.0, 4.0):
        index.touch_at(0, "".join(["sess", "ion"]), t, ended=False, wall=t)
    heap = index._partitions[0].heap
    assert len(heap) == 4
    assert all(entry[2] is first for entry in heap)
    assert index.due_at(0, 14.5, 14.5) == ["session"]
    assert index.due_at(0, 100.0, 100.0) == []  # the stale entries go without a trace
