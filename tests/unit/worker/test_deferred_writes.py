"""Deferred session writes (`TableSessionStore(deferred=True)`, the worker's path): each
session's newest record is written once per offset commit instead of once per event.

Property: over any mix of interleaved sessions, duplicates, dead letters, ended and
expired sessions, commits at any point and a crash (kill -9) at any point, the deferred
store gives the same outcome for every record as the per-event store, leaves the table
with the same records after each commit (less the verdicts acknowledged by then, which
the deferred write leaves out), and across a crash and the replay from the last
committed offset no verdict is lost or contradicted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.streams.worker.pipeline import Duplicate, Outcome, Rejected
from loopwatch.streams.worker.record import SessionRecord
from loopwatch.streams.worker.table_store import MAX_DECODED_RECORDS, TableSessionStore
from tests.support.builders import SessionBuilder
from tests.support.pipeline import FakeTable, Pipeline, Record, Sent, over_table

SESSIONS = ("s0", "s1", "s2", "s3")
PARTITIONS = 2


@dataclass
class Worker:
    """One worker process: the pipeline over `table` (tests.support.pipeline), with each
    record in its key's partition and its sends acknowledged at once."""

    table: FakeTable
    deferred: bool
    max_decoded: int = MAX_DECODED_RECORDS
    pipeline: Pipeline[TableSessionStore] = field(init=False)

    def __post_init__(self) -> None:
        self.pipeline = over_table(
            self.table,
            deferred=self.deferred,
            partition_of=_partition,
            max_decoded=self.max_decoded,
        )

    @property
    def sent(self) -> list[Sent]:
        return self.pipeline.sent

    def run(self, key: bytes | None, value: bytes | None) -> Outcome:
        partition = _partition(key)
        self.table.partition = partition
        return self.pipeline.process(key, value, partition)

    def commit(self) -> None:
        self.pipeline.store.write_pending()


def _acknowledged_left_out(table: FakeTable) -> dict[bytes, bytes]:
    """The table's values without their unconfirmed verdicts and episodes: the sends of
    `Worker` are acknowledged at once, so a deferred write (at a commit, after the
    sends) lists none of them, where a per-event write lists its event's own."""
    settled = {}
    for key, value in table.items():
        record = SessionRecord.decode(value)
        settled[key] = SessionRecord(
            record.state, record.last_seq, record.last_ts, (), (), record.seen, record.seen_wall
        ).encode()
    return settled


def _partition(key: bytes | None) -> int:
    return 0 if key is None else sum(key) % PARTITIONS


def _shape(outcome: Outcome) -> tuple[Any, ...]:
    """What the caller acts on: the kind, the bytes to publish, the sessions expired."""
    if isinstance(outcome, Rejected):
        return ("rejected", outcome.letter.kind)
    if isinstance(outcome, Duplicate):
        return ("duplicate", outcome.resend, outcome.resend_episodes, outcome.replayed)
    return (
        "processed",
        outcome.payload,
        outcome.episode_payloads,
        outcome.expired,
        tuple(e.to_json() for e in outcome.expired_episodes),
        outcome.record is None,
    )


_STEP = st.sampled_from(["loop", "other", "text", "end", "jump", "dup", "bad", "commit"])


@st.composite
def _scripts(draw: st.DrawFn) -> list[Record | None]:
    """Records (None: a commit point) over a few interleaved sessions."""
    builders = {s: SessionBuilder(s) for s in SESSIONS}
    for b in builders.values():
        b.user("fix the bug")
    out: list[Record | None] = [
        (s.encode(), b.events[0].model_dump_json().encode()) for s, b in builders.items()
    ]
    for _ in range(draw(st.integers(min_value=5, max_value=40))):
        kind = draw(_STEP)
        session = draw(st.sampled_from(SESSIONS))
        b = builders[session]
        if kind == "commit":
            out.append(None)
            continue
        if kind == "bad":
            out.append((session.encode(), b"{not json"))
            continue
        if kind == "dup":
            event = draw(st.sampled_from(b.events))
        elif kind == "loop":
            event = b.step(("read_file", {"path": "a.py"}))
        elif kind == "other":
            event = b.step(("read_file", {"path": f"{len(b.events)}.py"}))
        elif kind == "text":
            event = b.text()
        elif kind == "end":
            event = b.end()
        else:  # an event past the idle and ended deadlines: others expire
            b.seq += draw(st.sampled_from([61, 3601]))
            event = b.user("back again")
        out.append((session.encode(), event.model_dump_json().encode()))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=_scripts(), cached=st.sampled_from([0, 1, MAX_DECODED_RECORDS]))
def test_deferred_writes_give_the_per_event_outcomes_and_table(
    script: list[Record | None], cached: int
) -> None:
    """Whatever number of decoded records the deferred store keeps
    (`LOOPWATCH_SESSION_CACHE`: none, one, the default)."""
    per_event = Worker(FakeTable(), deferred=False)
    deferred = Worker(FakeTable(), deferred=True, max_decoded=cached)
    for item in script:
        if item is None:
            deferred.commit()
            assert dict(deferred.table) == _acknowledged_left_out(per_event.table)
            continue
        assert _shape(deferred.run(*item)) == _shape(per_event.run(*item))
    deferred.commit()
    assert dict(deferred.table) == _acknowledged_left_out(per_event.table)
    assert deferred.sent == per_event.sent
    # one write per session per commit at most
    assert len(deferred.table.changelog) <= len(per_event.table.changelog)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=_scripts(), crash_at=st.integers(min_value=0, max_value=60))
def test_a_crash_between_commits_loses_and_contradicts_no_verdict(
    script: list[Record | None], crash_at: int
) -> None:
    """kill -9 after `crash_at` records: what was not committed is lost (the noted
    records, the offsets); the next worker recovers the table as of the last commit and
    processes again from the last committed offset."""
    reference = Worker(FakeTable(), deferred=False)
    for item in script:
        if item is not None:
            reference.run(*item)
    # Usually one verdict per (session, seq); two when a session expired and an event of
    # it came again afterwards (it opens a new session then: contract §8).
    verdicts: dict[tuple[str, int], set[bytes]] = {}
    for s, seq, payload in reference.sent:
        verdicts.setdefault((s, seq), set()).add(payload)

    records = [item for item in script]
    first = Worker(FakeTable(), deferred=True)
    committed = 0  # index of the first record after the last commit
    crash_at = min(crash_at, len(records))
    for index, item in enumerate(records[:crash_at]):
        if item is None:
            first.commit()
            committed = index + 1
        else:
            first.run(*item)
    recovered = FakeTable()
    recovered.update(first.table)  # the changelog as of the last commit
    second = Worker(recovered, deferred=True)
    for item in records[committed:]:
        if item is None:
            second.commit()
        else:
            second.run(*item)
    delivered: dict[tuple[str, int], set[bytes]] = {}
    for s, seq, payload in (*first.sent, *second.sent):
        delivered.setdefault((s, seq), set()).add(payload)
    assert set(delivered) == set(verdicts)  # none lost, none invented
    for ident, payloads in delivered.items():
        assert payloads == verdicts[ident]  # none lost or contradicted


def _record(session: str, steps: int) -> SessionRecord:
    """The record a store holds for `session` after its first `steps` + 1 events."""
    builder = SessionBuilder(session)
    builder.user("fix the bug")
    for n in range(steps):
        builder.step(("read_file", {"path": f"{n}.py"}))
    worker = Worker(FakeTable(), deferred=True)
    for event in builder.events:
        worker.run(session.encode(), event.model_dump_json().encode())
    worker.commit()
    return SessionRecord.decode(worker.table[session.encode()])


def test_a_rebalance_empties_the_decoded_records_and_the_table_is_read_again() -> None:
    """The decoded records are the store's own writes: a session's next event reads
    neither the table nor a decode. A partition revoked may come back with another
    worker's writes in its table (a changelog recovery), so a revocation empties them."""
    table = FakeTable()
    store = TableSessionStore(table, deferred=True)
    mine, theirs = _record("s0", 1), _record("s0", 3)
    store.set("s0", mine)
    store.write_pending()
    assert store.get("s0") is not None
    assert store.get("s0") == mine
    table.reads = 0
    assert store.get("s0") == mine and table.reads == 0, "no read of the table"
    store.forget_partitions({0})  # revoked; then assigned again, recovered:
    dict.__setitem__(table, b"s0", theirs.encode())  # (another owner's write meanwhile)
    assert store.get("s0") == theirs
    assert table.reads == 1
    store.forget_partitions(set())  # a rebalance that revoked none of its partitions
    store.set("s0", mine)
    store.write_pending()
    assert store.get("s0") == mine


def test_without_decoded_records_every_get_reads_the_table() -> None:
    table = FakeTable()
    store = TableSessionStore(table, deferred=True, max_decoded=0)
    record = _record("s1", 2)
    store.set("s1", record)
    store.write_pending()
    table.reads = 0
    assert store.get("s1") == record == store.get("s1")
    assert table.reads == 2
