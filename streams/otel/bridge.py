"""The bridge's two stages, carried out to Kafka (the faust wiring is `streams.otel.app`).

1. `on_export_record`: an exporter record (any partition, keyed by trace or not at all)
   → one `SpanRecord` per GenAI span, keyed by session, on `<app_id>-spans`; a record
   that does not decode → the dead-letter topic.
2. `on_span_record`: a span record of one session → the `otel-sessions` table (reorder
   window, `streams.otel.ordering`); sessions whose window closed → events on
   `agent-events`. Ticks (records without a key, one per partition per second from every
   bridge) carry the wall clock, so windows close while no span arrives. The bridge's
   clock per partition is the newest of the ticks and of the Kafka timestamps of the span
   records it has read there: both are the bridges' own clocks (a re-keyed record is
   stamped by the bridge that produced it), kept in the topic, which makes a replay of
   the same records close the same windows: the same events with the same `seq`. The
   Collector's clock (the exporter records' timestamps) is never used: one record stamped
   far ahead would hold every session of the partition until real time caught up
   (contract §10.5).

The table is written only while a record of the same partition is being processed, as
faust requires: a session's span records and the ticks of its partition.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from loopwatch.streams.kafka.dead_letters import DeadLetter, send_dead_letter
from loopwatch.streams.kafka.expiry import ExpiryIndex, index_changelog_record
from loopwatch.streams.kafka.outputs import Outputs
from loopwatch.streams.otel.mapping import SpanRecord, to_record
from loopwatch.streams.otel.ordering import BridgeSession, admit, is_full, release
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.otel.spans import SpanDecodeError, decode_spans

log = logging.getLogger(__name__)

TICK_KEY = None
"""Ticks have no key; span records are keyed by session id."""


@dataclass
class BridgeCounters:
    """What the bridge did since it started (its `/metrics` page)."""

    records: int = 0
    dead_letters: int = 0
    spans_mapped: int = 0
    spans_ignored: int = 0
    """Spans that are neither `chat` nor `execute_tool` (or a tool span without a name)."""
    spans_stale: int = 0
    """Dropped: seen already, or arrived after newer spans of its session were released."""
    events: int = 0
    sessions_expired: int = 0

    def exposition(self) -> bytes:
        lines = []
        for name in (
            "records",
            "dead_letters",
            "spans_mapped",
            "spans_ignored",
            "spans_stale",
            "events",
            "sessions_expired",
        ):
            metric = f"loopwatch_otel_{name}_total"
            lines += [f"# TYPE {metric} counter", f"{metric} {getattr(self, name)}"]
        return ("\n".join(lines) + "\n").encode()


def tick_value(now_ms: int) -> bytes:
    return json.dumps({"tick": now_ms}).encode()


def _instant(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


class OtelBridge:
    """Both stages' handlers; one instance per app."""

    def __init__(self, *, table: Any, outputs: Outputs, settings: OtelSettings) -> None:
        self._table = table
        self._outputs = outputs
        self._settings = settings
        self._window_ms = settings.reorder_window_ms
        self._ttl_ms = settings.base.session_ttl_seconds * 1000
        self._deadlines = ExpiryIndex(timedelta(0), timedelta(0))  # partition -> sessions
        self._clock: dict[int, int] = {}
        self.counters = BridgeCounters()

    # -- stage 1 ---------------------------------------------------------------------------

    async def on_export_record(self, message: Any) -> None:
        self.counters.records += 1
        received_ms = int((message.timestamp or 0) * 1000)
        try:
            spans = decode_spans(message.value, self._settings.encoding)
        except SpanDecodeError as exc:
            await self._dead_letter(message, DeadLetter("not_otlp", str(exc)))
            return
        try:
            mapped = [to_record(span, received_ms, self._settings.unrecorded) for span in spans]
        except (ValueError, UnicodeError, RecursionError) as exc:
            # e.g. a structured argument holding NaN, or a lone surrogate in JSON text
            reason = (
                f"a GenAI span cannot be fingerprinted (docs/contract.md §3): {type(exc).__name__}"
            )
            await self._dead_letter(message, DeadLetter("schema", reason))
            return
        for record in mapped:
            if record is None:
                self.counters.spans_ignored += 1
                continue
            self.counters.spans_mapped += 1
            await self._outputs.send(
                self._settings.internal_topic, record.session_id.encode(), record.encode()
            )

    # -- stage 2 ---------------------------------------------------------------------------

    async def on_span_record(self, message: Any) -> None:
        partition: int = message.partition
        try:
            document = json.loads(message.value)
            if message.key is TICK_KEY:
                self._advance(partition, int(document["tick"]))
            else:
                record = SpanRecord.from_document(document)
                if message.timestamp:  # stamped by the bridge that re-keyed it
                    self._advance(partition, int(message.timestamp * 1000))
                await self._admit(partition, message.key, record)
        except (ValueError, TypeError, KeyError) as exc:
            await self._dead_letter(message, DeadLetter("internal", type(exc).__name__))
            return
        await self._release_due(partition)

    async def _admit(self, partition: int, key: bytes, record: SpanRecord) -> None:
        # The clock is the bridges' (ticks and re-keyed records, in the topic, so a replay
        # sees the same). Only a record without a timestamp (none on a broker) on a
        # partition without a clock yet falls back to the exporter record's time.
        now = self._clock.setdefault(partition, record.received_ms)
        session, admission = admit(self._load(key), record, now)
        if admission == "stale":
            self.counters.spans_stale += 1
        if is_full(session):
            session = await self._release(key, session)
        self._store(partition, key, session)

    def _advance(self, partition: int, ms: int) -> None:
        self._clock[partition] = max(self._clock.get(partition, ms), ms)

    async def _release_due(self, partition: int) -> None:
        now = self._clock.get(partition)
        if now is None:
            return
        for session_id in self._deadlines.due(partition, _instant(now)):
            key = session_id.encode()
            session = self._load(key)
            if session is None:
                continue
            if session.pending and session.opened_ms + self._window_ms <= now:
                self._store(partition, key, await self._release(key, session))
            elif not session.pending and session.last_ms + self._ttl_ms <= now:
                del self._table[key]
                self.counters.sessions_expired += 1
            else:
                self._index(partition, session_id, session)

    async def _release(self, key: bytes, session: BridgeSession) -> BridgeSession:
        released, events = release(session)
        for event in events:
            value = event.model_dump_json(exclude_none=True).encode()
            await self._outputs.send(self._settings.base.events_topic, key, value)
        self.counters.events += len(events)
        return released

    def _load(self, key: bytes) -> BridgeSession | None:
        stored = self._table.get(key)
        if stored is None:
            return None
        try:
            return BridgeSession.decode(stored)
        except (ValueError, KeyError, TypeError):
            log.warning("unreadable otel-sessions value for a session; starting it afresh")
            return None

    def _store(self, partition: int, key: bytes, session: BridgeSession) -> None:
        self._table[key] = session.encode()
        self._index(partition, key.decode(), session)

    def _index(self, partition: int, session_id: str, session: BridgeSession) -> None:
        deadline = session.deadline_ms(self._window_ms, self._ttl_ms)
        self._deadlines.touch(partition, session_id, _instant(deadline), ended=False)

    # -- recovery and rebalancing ----------------------------------------------------------

    def on_changelog_records(self, messages: list[Any]) -> None:
        """Recovery reads changelog records: rebuild the deadlines from them."""
        for message in messages:
            index_changelog_record(self._deadlines, message, BridgeSession.decode, self._index)

    def on_partitions_revoked(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._deadlines.drop_partition(partition)
            self._clock.pop(partition, None)

    async def _dead_letter(self, message: Any, letter: DeadLetter) -> None:
        self.counters.dead_letters += 1
        await send_dead_letter(self._outputs, self._settings.base.dlq_topic, message, letter)
