"""`OtelBridge`'s two stages on plain records (a dict for the table, a recording outputs):
ticks close windows by the bridge's clock, a Collector clock that is off does not hold
them, replays publish nothing, idle sessions expire, bad records are dead letters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopwatch.models import decode_event
from loopwatch.models.fingerprints import call_fingerprint
from loopwatch.streams.kafka.dead_letters import HEADER_ERROR
from loopwatch.streams.otel.bridge import OtelBridge, tick_value
from loopwatch.streams.otel.mapping import to_record
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.otel.spans import decode_spans
from tests.support.otel_spans import (
    LOOPING,
    InstrumentedAgent,
    Tool,
    encode_request,
    export_records,
    raw_session,
    rules,
)

NOW_MS = 1_796_000_000_000
WINDOW_MS = 1000
TTL_SECONDS = 60


@dataclass
class Message:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: float | None = None


@dataclass
class Recorder:
    sent: list[tuple[str, bytes | None, bytes | None, Any]] = field(default_factory=list)

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None, **_: Any
    ) -> None:
        self.sent.append((topic, key, value, headers))

    def add_changelog(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        raise AssertionError("the bridge writes its table, not the changelog")

    async def flush(self) -> None:
        return None

    def on(self, topic: str) -> list[tuple[str, bytes | None, bytes | None, Any]]:
        return [sent for sent in self.sent if sent[0] == topic]


@dataclass
class Bridge:
    settings: OtelSettings
    outputs: Recorder
    table: dict[bytes, bytes]
    handlers: OtelBridge
    offset: int = 0

    async def export(self, value: bytes | None, timestamp_ms: int) -> None:
        self.offset += 1
        message = Message(
            self.settings.spans_topic, 0, self.offset, None, value, timestamp_ms / 1000
        )
        await self.handlers.on_export_record(message)

    async def order(
        self, key: bytes | None, value: bytes | None, stamped_ms: int | None = None
    ) -> None:
        self.offset += 1
        timestamp = None if stamped_ms is None else stamped_ms / 1000
        message = Message(self.settings.internal_topic, 0, self.offset, key, value, timestamp)
        await self.handlers.on_span_record(message)

    async def tick(self, now_ms: int) -> None:
        await self.order(None, tick_value(now_ms))

    async def rekeyed(self, stamped_ms: int | None = None) -> None:
        """Hand every span record stage 1 sent so far to stage 2 (all on partition 0),
        with the Kafka timestamp the re-keying bridge's producer gave them."""
        for _topic, key, value, _ in self.outputs.on(self.settings.internal_topic):
            await self.order(key, value, stamped_ms)
        self.outputs.sent = [s for s in self.outputs.sent if s[0] != self.settings.internal_topic]

    def events(self) -> list[Any]:
        return [decode_event(v) for _, _, v, _ in self.outputs.on(self.settings.base.events_topic)]


def bridge() -> Bridge:
    settings = OtelSettings.from_env(
        {
            "LOOPWATCH_OTEL_REORDER_WINDOW_MS": str(WINDOW_MS),
            "LOOPWATCH_SESSION_TTL_SECONDS": str(TTL_SECONDS),
        }
    )
    outputs, table = Recorder(), {}
    return Bridge(
        settings, outputs, table, OtelBridge(table=table, outputs=outputs, settings=settings)
    )


def looping_records() -> list[bytes]:
    agent = InstrumentedAgent()
    agent.run("conv-1", LOOPING)
    return export_records(agent.spans(), batch=4, shuffle=3)


async def test_ticks_release_a_window_by_the_bridge_clock_not_the_collectors() -> None:
    b = bridge()
    await b.tick(NOW_MS)
    for value in looping_records():  # the Collector's clock is an hour ahead
        await b.export(value, NOW_MS + 3_600_000)
    await b.rekeyed()
    await b.tick(NOW_MS + WINDOW_MS)
    assert b.events() == []  # the window is still open
    await b.tick(NOW_MS + WINDOW_MS + 1)
    events = b.events()
    assert len(events) == len(raw_session(LOOPING))
    assert rules(events) == rules(raw_session(LOOPING))
    assert all(key == b"conv-1" for _, key, _, _ in b.outputs.on(b.settings.base.events_topic))


async def test_a_collector_clock_ahead_holds_no_session_before_the_first_tick() -> None:
    # A fresh partition (start, restart, rebalance): span records before any tick. The
    # Collector stamped its records 600 s ahead; the bridge's own stamp is the clock.
    b = bridge()
    skewed = InstrumentedAgent()
    skewed.run("skewed", LOOPING)
    for value in export_records(skewed.spans(), batch=4):
        await b.export(value, NOW_MS + 600_000)
    correct = InstrumentedAgent()
    correct.run("correct", LOOPING)
    for value in export_records(correct.spans(), batch=4):
        await b.export(value, NOW_MS)
    await b.rekeyed(stamped_ms=NOW_MS)
    await b.tick(NOW_MS + WINDOW_MS + 1)
    sessions = {event.session_id for event in b.events()}
    assert sessions == {"skewed", "correct"}  # both within their window, none held 600 s


async def test_a_collector_clock_behind_closes_no_window_early() -> None:
    # 600 s behind: a window opened by that clock would close at the first tick, and the
    # session's spans still in flight would come after its release (stale, lost).
    b = bridge()
    records = looping_records()
    for value in records[:2]:
        await b.export(value, NOW_MS - 600_000)
    await b.rekeyed(stamped_ms=NOW_MS)
    await b.tick(NOW_MS + WINDOW_MS // 2)
    assert b.events() == []  # the window is open: half of it has passed
    for value in records[2:]:
        await b.export(value, NOW_MS - 600_000 + WINDOW_MS // 2)
    await b.rekeyed(stamped_ms=NOW_MS + WINDOW_MS // 2)
    await b.tick(NOW_MS + WINDOW_MS + 1)
    assert b.handlers.counters.spans_stale == 0
    assert rules(b.events()) == rules(raw_session(LOOPING))


async def test_records_delivered_again_publish_nothing() -> None:
    b = bridge()
    await b.tick(NOW_MS)
    records = looping_records()
    for value in records:
        await b.export(value, NOW_MS)
    await b.rekeyed()
    await b.tick(NOW_MS + 5 * WINDOW_MS)
    published = len(b.events())
    spans = b.handlers.counters.spans_mapped
    for value in records:
        await b.export(value, NOW_MS + 6 * WINDOW_MS)
    await b.rekeyed()
    await b.tick(NOW_MS + 10 * WINDOW_MS)
    assert len(b.events()) == published > 0
    assert b.handlers.counters.spans_stale == spans


async def test_an_idle_session_expires_after_the_ttl() -> None:
    b = bridge()
    await b.tick(NOW_MS)
    for value in looping_records():
        await b.export(value, NOW_MS)
    await b.rekeyed()
    await b.tick(NOW_MS + 2 * WINDOW_MS)
    assert b"conv-1" in b.table
    await b.tick(NOW_MS + TTL_SECONDS * 1000 - 1)
    assert b"conv-1" in b.table
    await b.tick(NOW_MS + TTL_SECONDS * 1000 + 1)
    assert b"conv-1" not in b.table and b.handlers.counters.sessions_expired == 1


async def test_bad_records_are_dead_letters() -> None:
    b = bridge()
    await b.export(b"\x00 not otlp", NOW_MS)
    await b.order(b"conv-1", b"{not a span record")
    kinds = [dict(h)[HEADER_ERROR] for _, _, _, h in b.outputs.on(b.settings.base.dlq_topic)]
    assert kinds == [b"not_otlp", b"internal"]
    assert b.table == {}


async def test_a_span_that_cannot_be_fingerprinted_sends_its_record_to_the_dead_letters() -> None:
    agent = InstrumentedAgent(record_content=False)
    agent.run("conv-1", [[Tool("bash", recorded_arguments=[float("nan")])]])
    b = bridge()
    await b.export(encode_request(agent.spans()), NOW_MS)
    [(_, _, _, headers)] = b.outputs.on(b.settings.base.dlq_topic)
    assert dict(headers)[HEADER_ERROR] == b"schema"
    assert b.outputs.on(b.settings.internal_topic) == []  # nothing of the record goes on


def test_json_text_with_nan_counts_as_text() -> None:
    agent = InstrumentedAgent(record_content=False)
    agent.run("conv-1", [[Tool("bash", recorded_arguments='{"x": NaN}')]])
    spans = decode_spans(encode_request(agent.spans()), "otlp_proto")
    record = next(r for s in spans if (r := to_record(s, 0)) and r.kind == "tool")
    assert record.call_fingerprint == call_fingerprint("bash", '{"x": NaN}')
