"""A mass expiry in bounded steps (issue 33, item 6): one record's processing deletes at
most `SWEEP_PER_STEP` sessions, the rest are carried over and deleted by `sweep` a step
at a time until none is left, each exactly once; a session that gets an event meanwhile
stays; and the index's dict is compacted once the sweep has emptied most of it."""

from __future__ import annotations

import sys
from datetime import timedelta

from loopwatch.streams.kafka.expiry import COMPACT_AT, ExpiryIndex
from loopwatch.streams.worker.pipeline import SWEEP_PER_STEP, Processed, sweep
from loopwatch.streams.worker.store import MemorySessionStore
from tests.support.builders import SessionBuilder
from tests.support.pipeline import FakeTable, Pipeline, over_table

TTL = 3600.0
DUE = 10 * SWEEP_PER_STEP + 7
"""Sessions due at once: ten full steps and a partial one."""


def _loaded(store: MemorySessionStore | None = None) -> Pipeline[MemorySessionStore]:
    """DUE idle sessions (one of them looping), all read at event time 0-ish."""
    worker = Pipeline(MemorySessionStore() if store is None else store)
    looping = SessionBuilder("idle-looping")
    looping.user("fix it")
    for _ in range(3):
        looping.step(("read_file", {"path": "a.py"}))
        looping.result(result="same text")
    worker.run_events(looping.events)
    worker.run_events(SessionBuilder(f"idle-{n}").user() for n in range(DUE - 1))
    return worker


def _trigger(worker: Pipeline[MemorySessionStore], name: str = "trigger") -> Processed:
    late = SessionBuilder(name)
    late.seq = int(TTL) + 100  # an event an hour and more later: every idle session is due
    (outcome,) = worker.run_events([late.user()])
    assert isinstance(outcome, Processed)
    return outcome


def test_a_record_deletes_at_most_a_step_and_the_sweep_finishes_the_rest() -> None:
    worker = _loaded()
    outcome = _trigger(worker)
    assert len(outcome.expired) == SWEEP_PER_STEP
    assert worker.expiry.carried_over() == {0}

    deleted = [session for session, _ in outcome.expired]
    episodes = list(outcome.expired_episodes)
    steps = 0
    while worker.expiry.carried_over():
        swept = sweep(worker.store, worker.expiry, 0)
        assert 0 < len(swept.expired) <= SWEEP_PER_STEP
        deleted += [session for session, _ in swept.expired]
        episodes += swept.episodes
        steps += 1
    assert steps == -(-(DUE - SWEEP_PER_STEP) // SWEEP_PER_STEP)
    assert sorted(deleted) == sorted(["idle-looping", *(f"idle-{n}" for n in range(DUE - 1))])
    assert set(worker.store.records) == {"trigger"}
    assert worker.expiry.sessions() == 1
    # the looping session's open episode ended with it, whichever step deleted it
    assert {(e.session_id, e.outcome) for e in episodes} == {("idle-looping", "expired")}
    assert sweep(worker.store, worker.expiry, 0).expired == ()  # nothing left to do


def test_records_during_the_sweep_take_a_step_each_and_keep_their_own_session() -> None:
    worker = _loaded()
    _trigger(worker)
    left = DUE - SWEEP_PER_STEP
    # idle-99 (the last of its deadline to be taken: ties go by session id) comes back
    # while carried over: its new event keeps it, and its record's step deletes others
    assert "idle-99" in worker.store.records
    back = SessionBuilder("idle-99")
    back.seq = int(TTL) + 101
    (outcome,) = worker.run_events([back.user()])
    assert isinstance(outcome, Processed)
    assert "idle-99" not in {session for session, _ in outcome.expired}
    assert len(outcome.expired) <= SWEEP_PER_STEP
    left -= len(outcome.expired)
    while worker.expiry.carried_over():
        left -= len(sweep(worker.store, worker.expiry, 0).expired)
    assert left == 1  # idle-99, alive
    assert set(worker.store.records) == {"trigger", "idle-99"}


def test_a_sweep_writes_under_the_partition_it_is_given() -> None:
    # the worker's table takes a write's partition from the current event; the sweep
    # between records is given it by the caller (`SessionTable.writing_in`)
    table = FakeTable()
    worker = over_table(table)
    for n in range(3 * SWEEP_PER_STEP):
        worker.run_events([SessionBuilder(f"idle-{n}").user()])
    late = SessionBuilder("late")
    late.seq = int(TTL) + 100
    worker.run_events([late.user()])
    table.changelog.clear()
    with table.writing_in(0):
        swept = sweep(worker.store, worker.expiry, 0)
    assert len(swept.expired) == SWEEP_PER_STEP
    assert [(p, value) for p, _, value in table.changelog] == [(0, None)] * SWEEP_PER_STEP


def test_the_index_is_compacted_after_a_mass_expiry() -> None:
    index = ExpiryIndex(timedelta(seconds=TTL), timedelta(seconds=60))
    sessions = 64 * COMPACT_AT
    for n in range(sessions):
        index.touch_at(0, f"s{n}", 1000.0, ended=False, wall=1000.0)
    index.touch_at(0, "late", 1000.0 + 2 * TTL, ended=False, wall=1000.0 + 2 * TTL)
    full = sys.getsizeof(index._partitions[0].deadlines)
    gone = index.due_at(0, 1000.0 + 2 * TTL, 1000.0 + 2 * TTL, limit=SWEEP_PER_STEP)
    while index.carried_over():
        gone += index.due_again(0, SWEEP_PER_STEP)
    assert len(gone) == len(set(gone)) == sessions
    assert index.sessions() == 1
    assert sys.getsizeof(index._partitions[0].deadlines) < full / 50
    assert len(index._partitions[0].heap) == 1  # late's
    # a refill is indexed as before
    index.touch_at(0, "again", 1000.0 + 2 * TTL, ended=False, wall=1000.0 + 2 * TTL)
    assert index.sessions() == 2


def test_a_limited_sweep_passes_over_stale_entries_in_bounded_work() -> None:
    # sessions touched again leave stale heap entries; a step pops a bounded number of
    # them and says it has more to do rather than popping them all at once
    index = ExpiryIndex(timedelta(seconds=TTL), timedelta(seconds=60))
    for n in range(2000):
        index.touch_at(0, f"s{n}", 1000.0, ended=False, wall=1000.0)
    for n in range(2000):
        index.touch_at(0, f"s{n}", 1000.0 + TTL, ended=False, wall=1000.0 + TTL)
    assert index.due_at(0, 1000.0 + TTL + 1, 1000.0 + TTL + 1, limit=4) == []
    assert index.carried_over() == {0}  # stale entries left to pass over
    while index.carried_over():
        assert index.due_again(0, 4) == []
    assert index.sessions() == 2000
