"""The worker's batch hand-off (`LOOPWATCH_BATCH_HAND_OFF`: `handle_batch` over a
partition's fetched records) against its per-record hand-off (`handle_fetched`), in the
real app with the memory store and recording outputs.

Property: over any mix of interleaved sessions on two partitions, duplicates, bad records
(dead letters), ended sessions, idle jumps (state resets, expiry), commits anywhere, any
cut of each partition's records into fetched batches and a rebalance that stops the flow
inside a batch (its rest is read again in the next fetch, from the offset the rebalance's
commit left), every record sent (verdicts, warnings, episodes, dead letters with their
headers) and the table after each commit are the same, record by record and in order."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from faust.types import TP, Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.streams.kafka.faust_ext.batch_hand_off import BatchProgress
from loopwatch.streams.worker.app import create_app
from tests.stream.conftest import Harness, _recording_outputs
from tests.stream.settings_for_tests import stream_settings
from tests.support.builders import SessionBuilder
from tests.support.pipeline import stamped

SESSIONS = ("s0", "s1", "s2", "s3", "s4")
PARTITIONS = 2
EPOCH = 1_796_220_000.0  # a log time for records without a readable event time

Script = list[tuple[bytes, bytes] | None]
"""Records of the events topic (key, value); None: an offset commit."""


def _partition(key: bytes) -> int:
    return sum(key) % PARTITIONS


def _harness() -> Harness:
    values = stream_settings(
        partitions=PARTITIONS, session_ttl_seconds=3600, ended_retention_seconds=60
    )
    outputs = _recording_outputs(values)
    app = create_app(values, outputs=outputs)
    app.finalize()
    return Harness(app, outputs)


class Clock:
    """The worker's clock: each record is read at its own log time (the handler asks once
    per record, in processing order, on both paths)."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def __call__(self) -> datetime:
        return datetime.fromtimestamp(self.stamps.pop(0), UTC)


@st.composite
def _scripts(draw: st.DrawFn) -> Script:
    builders = {s: SessionBuilder(s) for s in SESSIONS}
    out: Script = []
    for s in SESSIONS[:2]:
        out.append((s.encode(), builders[s].user("fix the bug").model_dump_json().encode()))
    kinds = st.sampled_from(
        ["loop", "loop", "other", "text", "end", "jump", "dup", "bad", "commit"]
    )
    for _ in range(draw(st.integers(min_value=5, max_value=50))):
        kind = draw(kinds)
        session = draw(st.sampled_from(SESSIONS))
        b = builders[session]
        if kind == "commit":
            out.append(None)
            continue
        if kind == "bad":
            out.append((session.encode(), draw(st.sampled_from([b"{not json", b"\xff", b"{}"]))))
            continue
        if kind == "dup":
            event = draw(st.sampled_from(b.events)) if b.events else b.user()
        elif kind == "loop":
            event = b.step(("read_file", {"path": "a.py"}))
        elif kind == "other":
            event = b.step(("read_file", {"path": f"{len(b.events)}.py"}))
        elif kind == "text":
            event = b.text()
        elif kind == "end":
            event = b.end()
        else:  # past the idle TTL and the ended retention: resets, expiry of others
            b.seq += draw(st.sampled_from([61, 3601]))
            event = b.user("back again")
        out.append((session.encode(), event.model_dump_json().encode()))
    return out


def _fetches(
    draw: st.DrawFn, script: Script
) -> list[tuple[str, Any]]:  # ("commit", None) | ("fetch", {partition: [records]})
    """The script as the consumer would hand it over: between commits, fetches that each
    take the next few records of every partition (in the script's order per partition)."""
    steps: list[tuple[str, Any]] = []
    segment: list[tuple[bytes, bytes]] = []
    for item in [*script, None]:
        if item is not None:
            segment.append(item)
            continue
        queues = {p: [r for r in segment if _partition(r[0]) == p] for p in range(PARTITIONS)}
        while any(queues.values()):
            fetch = {}
            for p, queue in queues.items():
                take = draw(st.integers(min_value=0, max_value=len(queue)))
                if take:
                    fetch[p], queues[p] = queue[:take], queue[take:]
            if fetch:
                steps.append(("fetch", fetch))
        segment = []
        steps.append(("commit", None))
    return steps


def _until(limit: int) -> BatchProgress:
    """Progress whose flow stops (a rebalance) once `limit` records are done."""
    progress = BatchProgress(lambda: progress.done < limit)
    return progress


def _by_partition(sent: list[Any]) -> list[list[Any]]:
    """The records sent, per partition of their key (a rebalance that splits a batch
    changes how partitions interleave, never the order within one)."""
    return [[s for s in sent if _partition(s.key or b"") == p] for p in range(PARTITIONS)]


class Driver:
    """One app, fed fetch by fetch: per record (`handle_fetched`) or per partition's
    batch (`handle_batch`), with a rebalance stopping the flow after `stop_after`
    records of the `stop_in`-th batch (its rest comes again in the next fetch)."""

    def __init__(self, batches: bool, stop_in: int | None = None, stop_after: int = 0) -> None:
        self.harness = _harness()
        self.batches = batches
        self.clock = Clock()
        self.harness.app.loopwatch_handler.clock = self.clock
        self.offsets = [0] * PARTITIONS
        self.stop_in = stop_in
        self.stop_after = stop_after
        self.batches_seen = 0
        self.carried: dict[int, list[Message]] = {}
        self.carried_any = False
        self.tables: list[dict[bytes, bytes]] = []

    def _message(self, partition: int, key: bytes, value: bytes) -> Message:
        topic = self.harness.app.loopwatch_topics.events.get_topic_name()
        stamp = stamped(value) or EPOCH
        message = Message(topic, partition, self.offsets[partition], stamp, 0, [], key, value, None)
        self.offsets[partition] += 1
        return message

    async def fetch(self, fetch: dict[int, list[tuple[bytes, bytes]]]) -> None:
        app = self.harness.app
        handed = {p: [self._message(p, *r) for r in records] for p, records in fetch.items()}
        for p, rest in self.carried.items():  # read again after the rebalance's commit
            handed[p] = rest + handed.get(p, [])
        self.carried = {}
        for p in sorted(handed):
            messages = handed[p]
            if not self.batches:
                for message in messages:
                    self.clock.stamps.append(message.timestamp)
                    await app.loopwatch_handle_fetched(message)
                continue
            self.batches_seen += 1
            stop = self.batches_seen == self.stop_in
            limit = self.stop_after if stop else len(messages)
            progress = _until(limit)
            self.clock.stamps.extend(m.timestamp for m in messages[:limit])
            await app.loopwatch_handle_batch(messages[0].tp, messages, progress)
            assert progress.done == min(limit, len(messages))
            if progress.done < len(messages):
                self.carried[p] = list(messages[progress.done :])
                self.carried_any = True

    async def finish(self) -> None:
        if self.carried:
            await self.fetch({})

    def commit(self) -> None:
        self.harness.commit_writes()
        self.tables.append(dict(self.harness.app.loopwatch_table.items()))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example],
)
@given(data=st.data(), script=_scripts())
async def test_batches_give_the_per_record_outcomes(data: st.DataObject, script: Script) -> None:
    steps = _fetches(data.draw, script)
    fetches = sum(1 for kind, _ in steps if kind == "fetch")
    stop_in = data.draw(st.integers(min_value=1, max_value=max(1, fetches * PARTITIONS)))
    stop_after = data.draw(st.integers(min_value=0, max_value=5))
    per_record = Driver(batches=False)
    batched = Driver(batches=True, stop_in=stop_in, stop_after=stop_after)
    for kind, fetch in steps:
        for driver in (per_record, batched):
            if kind == "commit":
                await driver.finish()  # a commit covers what the rebalance left
                driver.commit()
            else:
                await driver.fetch(fetch)
    assert _by_partition(batched.harness.outputs.sent) == _by_partition(
        per_record.harness.outputs.sent
    )
    if stop_in > fetches * PARTITIONS or not batched.carried_any:
        assert batched.harness.outputs.sent == per_record.harness.outputs.sent
    assert batched.tables == per_record.tables
    assert batched.harness.app.loopwatch_handler._expiry.sessions() == (
        per_record.harness.app.loopwatch_handler._expiry.sessions()
    )


async def test_a_batch_stops_at_a_record_past_a_missing_one() -> None:
    """The offset guard holds back a record past a gap (faust dropped the ones before
    it): the batch ends there, the records before it processed and counted."""
    driver = Driver(batches=True)
    app = driver.harness.app
    b = SessionBuilder("s0")
    events = [b.user(), b.text(), b.text()]
    messages = [driver._message(0, b"s0", e.model_dump_json().encode()) for e in events]
    del messages[1]  # offset 1 never arrives
    driver.clock.stamps.extend(m.timestamp for m in messages)
    progress = BatchProgress(lambda: True)
    await app.loopwatch_handle_batch(messages[0].tp, messages, progress)
    assert progress.done == 1, "offset 0 processed, offset 2 held back"
    assert [s.topic for s in driver.harness.sent] == ["verdicts"]
    order_busy: Sequence[bool] = [app.consumer.handing_over]
    assert order_busy == [False]
    assert TP(messages[0].topic, 0) == messages[0].tp
