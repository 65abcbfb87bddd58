"""The per-record pipeline (`process_record`) on plain lists of records, without faust or
Kafka: verdicts, dedupe, resend of unacknowledged verdicts, dead letters and expiry,
with `MemorySessionStore` as the session table."""

from __future__ import annotations

import json

import pytest

from loopwatch.models import DetectionConfig
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.worker.pipeline import Duplicate, Processed, Rejected
from loopwatch.streams.worker.record import SessionRecord
from loopwatch.streams.worker.store import MemorySessionStore
from tests.support.builders import SessionBuilder
from tests.support.pipeline import Pipeline, options, record_of


def _looping(session_id: str = "s1") -> SessionBuilder:
    b = SessionBuilder(session_id)
    b.user("fix the bug")
    for _ in range(3):
        b.step(("read_file", {"path": "a.py"}))
        b.result(result="same text")
    return b


def test_verdicts_equal_the_scanner_on_interleaved_sessions() -> None:
    one, two = _looping("s1"), _looping("s2")
    two.end()
    events = [e for pair in zip(one.events, two.events, strict=False) for e in pair]
    events += two.events[len(one.events) :]
    worker = Pipeline(MemorySessionStore(), options=options(drop_ended=True))
    outcomes = worker.run_events(events)

    assert all(isinstance(o, Processed) for o in outcomes)
    expected = [v.model_dump(mode="json") for v in Scanner(DetectionConfig()).run(events)]
    got = [json.loads(payload) for payload in worker.payloads]
    for verdict in (*expected, *got):
        verdict.pop("evaluated_at")
    assert got == expected
    assert any(v["warning"] for v in got)
    assert set(worker.store.records) == {"s1"}  # s2 ended: dropped at once
    last = outcomes[-1]
    assert isinstance(last, Processed) and last.record is None


def test_duplicates_and_out_of_order_events_change_nothing_and_get_no_verdict() -> None:
    b = _looping()
    worker = Pipeline(MemorySessionStore())
    worker.run_events(b.events)
    stored = worker.store.records["s1"]
    sent = len(worker.payloads)

    outcomes = worker.run_events([b.events[-1], b.events[2]])
    assert [type(o) for o in outcomes] == [Duplicate, Duplicate]
    assert all(isinstance(o, Duplicate) and o.resend is None for o in outcomes)
    assert len(worker.payloads) == sent
    assert worker.store.records["s1"] is stored


def test_an_unacknowledged_verdict_is_resent_once_by_the_next_worker() -> None:
    b = _looping()
    first = Pipeline(MemorySessionStore())
    first.run_events(b.events[:-1])
    first.hold_acks = True  # the broker never acknowledges the last verdict
    first.run_events(b.events[-1:])
    (again,) = first.run_events(b.events[-1:])  # in flight here: not sent twice
    assert isinstance(again, Duplicate) and again.resend is None and not again.replayed
    stored = first.store.records["s1"]
    assert [seq for seq, _ in stored.unconfirmed] == [b.events[-1].seq]

    # The next worker recovers the table and reads the uncommitted record again.
    second = Pipeline(MemorySessionStore())
    second.store.records = {"s1": SessionRecord.decode(stored.encode())}
    (resent,) = second.run_events(b.events[-1:])
    assert isinstance(resent, Duplicate) and resent.replayed
    assert resent.resend == first.payloads[-1]
    assert second.payloads == [first.payloads[-1]]
    # A record it reads again after that is a plain duplicate.
    (plain,) = second.run_events(b.events[-1:])
    assert isinstance(plain, Duplicate) and plain.resend is None


def test_the_next_event_drops_the_acknowledged_front_of_the_verdicts_in_flight() -> None:
    b = _looping()
    worker = Pipeline(MemorySessionStore(), hold_acks=True)
    events = b.events[:5]
    worker.run_events(events[:3])  # three verdicts in flight

    def carried() -> list[int]:
        return [seq for seq, _ in worker.store.records["s1"].unconfirmed]

    assert carried() == [e.seq for e in events[:3]]
    # The second is acknowledged, not the first: it stays behind the first.
    worker.ack(events[1].seq)
    worker.run_events(events[3:4])
    assert carried() == [e.seq for e in events[:4]]
    # The first too: the front goes, up to the next one in flight.
    worker.ack(events[0].seq)
    worker.run_events(events[4:5])
    assert carried() == [events[2].seq, events[3].seq, events[4].seq]
    # Every one in flight is kept, and a replay after a crash resends exactly those.
    for event in events[2:5]:
        assert worker.store.is_unconfirmed("s1", event.seq)
    second = Pipeline(MemorySessionStore())
    second.store.records = {"s1": SessionRecord.decode(worker.store.records["s1"].encode())}
    resent = second.run_events(events[2:5])
    assert [o.resend for o in resent if isinstance(o, Duplicate)] == worker.payloads[2:5]


def test_acknowledged_verdicts_leave_the_storedrecord_of() -> None:
    b = _looping()
    worker = Pipeline(MemorySessionStore())
    worker.run_events(b.events)
    stored = worker.store.records["s1"]
    assert [seq for seq, _ in stored.unconfirmed] == [b.events[-1].seq]


@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [
        (b"s1", None, "empty"),
        (b"s1", b"x" * 5000, "too_large"),
        (b"s1", b"\xff\xfe", "not_utf8"),
        (b"s1", b"{not json", "not_json"),
        (b"s1", b'{"type": "user_message", "session_id": "s1"}', "schema"),
        (
            b"s1",
            b'{"type":"user_message","session_id":"other","seq":5,"ts":"2026-12-02T09:00:00Z"}',
            "key_mismatch",
        ),
    ],
)
def test_bad_records_are_rejected_between_good_ones_and_change_nothing(
    key: bytes, value: bytes | None, kind: str
) -> None:
    b = SessionBuilder("s1")
    first, second = b.user(), b.text()
    worker = Pipeline(MemorySessionStore())
    outcomes = worker.run([record_of(first), (key, value), record_of(second)])

    assert [type(o) for o in outcomes] == [Processed, Rejected, Processed]
    rejected = outcomes[1]
    assert isinstance(rejected, Rejected) and rejected.letter.kind == kind
    assert [json.loads(p)["seq"] for p in worker.payloads] == [0, 1]
    assert worker.store.records["s1"].last_seq == 1


def test_a_stored_record_that_does_not_decode_is_an_internal_dead_letter() -> None:
    class BrokenStore(MemorySessionStore):
        def get(self, session_id: str) -> SessionRecord | None:
            return SessionRecord.decode(b"{}")

    worker = Pipeline(BrokenStore())
    (outcome,) = worker.run_events([SessionBuilder("s1").user()])
    assert isinstance(outcome, Rejected) and outcome.letter.kind == "internal"
    assert outcome.letter.reason == "ValueError"  # the class only, never content


def test_idle_sessions_expire_by_event_time_and_start_afresh() -> None:
    idle, busy = SessionBuilder("idle"), SessionBuilder("busy")
    worker = Pipeline(MemorySessionStore())
    worker.run_events([idle.user(), busy.user()])
    busy.seq = 3601  # event time one hour and a second later
    (outcome,) = worker.run_events([busy.user()])

    assert isinstance(outcome, Processed) and outcome.expired == (("idle", False),)
    assert set(worker.store.records) == {"busy"}
    idle.seq = 4000
    worker.run_events([idle.user()])
    assert worker.store.records["idle"].last_seq == 4000


def test_ended_sessions_are_kept_for_their_retention_then_deleted() -> None:
    b = _looping()
    end = b.end()
    worker = Pipeline(MemorySessionStore())
    worker.run_events(b.events)
    assert worker.store.records["s1"].ended
    (replayed,) = worker.run_events([end])  # within the retention: still a duplicate
    assert isinstance(replayed, Duplicate)

    later = SessionBuilder("s2")
    later.seq = end.seq + 61
    (outcome,) = worker.run_events([later.user()])
    assert isinstance(outcome, Processed) and outcome.expired == (("s1", True),)
    assert set(worker.store.records) == {"s2"}


def test_expiry_is_per_partition_clock() -> None:
    worker = Pipeline(MemorySessionStore())
    old, new = SessionBuilder("old"), SessionBuilder("new")
    worker.run([record_of(old.user())], partition=0)
    new.seq = 7200
    worker.run([record_of(new.user())], partition=1)
    assert set(worker.store.records) == {"old", "new"}  # partition 0's clock has not moved


def test_loop_episodes_come_out_with_their_event_and_with_idle_expiry() -> None:
    worker = Pipeline(MemorySessionStore())
    looping = SessionBuilder("looping")
    for _ in range(3):
        looping.call("search", {"q": "x"})
        looping.result(result="nothing")
    moved_on = SessionBuilder("moved-on")
    for _ in range(3):
        moved_on.call("search", {"q": "x"})
        moved_on.result(result="nothing")
    moved_on.call("search", {"q": "y"})
    closing = moved_on.result(result="found")
    outcomes = worker.run_events([*looping.events, *moved_on.events])
    closed = {
        outcome.event.seq: outcome.episodes
        for outcome in outcomes
        if isinstance(outcome, Processed) and outcome.episodes
    }
    assert list(closed) == [closing.seq]  # both episodes of moved-on end at its result
    assert {e.outcome for e in closed[closing.seq]} == {"broken"}
    record = worker.store.get("moved-on")
    assert record is not None and record.state is not None and record.state.episodes == ()

    later = SessionBuilder("later")
    later.seq = 3600 + 10  # an hour of event time later: "looping" is idle past its TTL
    [outcome] = worker.run_events([later.user()])
    assert isinstance(outcome, Processed)
    assert {(e.session_id, e.outcome) for e in outcome.expired_episodes} == {("looping", "expired")}
    assert {e.rule for e in outcome.expired_episodes} == {"repeated_result", "repeated_batch"}
