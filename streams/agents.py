"""The table-writing agent: carries `process_record` outcomes out to faust.

One instance per app. Runs with concurrency 1 (faust loses offsets with more, and the
table must see a session's events in order). All writes go through `table[key] = value`
or `del table[key]` while an event of the same partition is current, as faust requires.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from models import DetectionConfig, InvalidPolicy
from streams.dead_letters import DeadLetter, SourcePosition, dead_letter_headers
from streams.expiry import ExpiryIndex
from streams.metrics import Metrics
from streams.outputs import Outputs
from streams.policy_book import PolicyBook
from streams.processing import Duplicate, Processed, Rejected, process_record
from streams.session_record import SessionRecord
from streams.topics import Topics

log = logging.getLogger(__name__)

MAX_REMEMBERED_ACKS = 65536
MAX_DECODED_RECORDS = 4096
"""Decoded table values kept per key; beyond it the least recently used is decoded again."""


class SessionAgent:
    """Processes `agent-events` records against the `sessions` table."""

    def __init__(
        self,
        *,
        table: Any,
        topics: Topics,
        outputs: Outputs,
        config: DetectionConfig,
        expiry: ExpiryIndex,
        metrics: Metrics,
        max_event_bytes: int,
        drop_ended: bool,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        policies: PolicyBook | None = None,
        policies_loaded: asyncio.Event | None = None,
    ) -> None:
        self._table = table
        self._outputs = outputs
        self._verdicts_topic: str = topics.verdicts.get_topic_name()
        self._warnings_topic: str = topics.warnings.get_topic_name()
        self._dead_letters_topic: str = topics.dead_letters.get_topic_name()
        self._config = config
        self._expiry = expiry
        self._metrics = metrics
        self._max_event_bytes = max_event_bytes
        self._drop_ended = drop_ended
        self._clock = clock
        self._policies = policies
        # Set once the policy topic has been read up to its end at start-up: events wait
        # for it, so none is judged by a policy older than what the topic held.
        self._policies_loaded = policies_loaded
        # Verdict sends not yet acknowledged (value: a token of that send); the delivery
        # callback removes each one.
        self._inflight: dict[tuple[str, int], object] = {}
        # Recently acknowledged ones (bounded): a duplicate of their event needs no resend.
        self._acked: OrderedDict[tuple[str, int], None] = OrderedDict()
        # The decoded form of the table values this worker wrote last (LRU): the next event
        # of a session skips the JSON decode when the stored bytes are still the same.
        self._decoded: OrderedDict[bytes, tuple[bytes, SessionRecord]] = OrderedDict()

    def is_unconfirmed(self, session_id: str, seq: int) -> bool:
        return (session_id, seq) in self._inflight

    def sent_by_this_worker(self, session_id: str, seq: int) -> bool:
        ident = (session_id, seq)
        return ident in self._inflight or ident in self._acked

    async def process(self, event: Any) -> None:
        """Handle one faust event (its message holds the raw key and value)."""
        message = event.message
        key: bytes | None = message.key
        value: bytes | None = message.value
        stored_key: list[bytes] = []
        if self._policies_loaded is not None and not self._policies_loaded.is_set():
            await self._policies_loaded.wait()

        def load(session_id: str) -> bytes | None:
            stored_key.append(session_id.encode())
            stored: bytes | None = self._table.get(stored_key[0])
            return stored

        def decode(stored: bytes) -> SessionRecord:
            cached = self._decoded.get(stored_key[0])
            if cached is not None and cached[0] == stored:
                return cached[1]
            return SessionRecord.decode(stored)

        outcome = process_record(
            key,
            value,
            load,
            self._config,
            max_event_bytes=self._max_event_bytes,
            now=self._clock(),
            is_unconfirmed=self.is_unconfirmed,
            sent_by_this_worker=self.sent_by_this_worker,
            drop_ended=self._drop_ended,
            decode=decode,
            policies=self._policies,
        )
        if isinstance(outcome, Rejected):
            await self._dead_letter(message, outcome.letter)
            return
        if isinstance(outcome, Duplicate):
            event = outcome.event
            replayed = not self.sent_by_this_worker(event.session_id, event.seq)
            if replayed and stored_key:
                self._write_back(stored_key[0])
            if outcome.resend is not None:
                self._metrics.resent.inc()
                await self._publish(
                    outcome.event.session_id,
                    outcome.event.seq,
                    outcome.resend,
                    _rule_of(outcome.resend),
                    message.timestamp,
                )
            else:
                self._metrics.duplicates.inc()
            return
        await self._apply(message, outcome, stored_key[0])

    async def _apply(self, message: Any, outcome: Processed, table_key: bytes) -> None:
        event = outcome.event
        self._metrics.count_event(event.type)
        warning = outcome.verdict.warning
        rule = None if warning is None else warning.rule
        # Verdict first, then state: the stored record lists this verdict as unconfirmed
        # until the broker acknowledges it, so a crash in between cannot lose it.
        await self._publish(event.session_id, event.seq, outcome.payload, rule, message.timestamp)
        if warning is not None:
            agent = self._metrics.agent_label(event.agent_id)
            self._metrics.warnings.labels(warning.rule, agent).inc()
        self._metrics.count_verdict()
        if outcome.record is None:
            self._delete(table_key)
            self._expiry.forget(message.partition, event.session_id)
            self._metrics.expired.labels("ended").inc()
        else:
            encoded = outcome.record.encode()
            self._table[table_key] = encoded
            self._remember(table_key, encoded, outcome.record)
            self._expiry.touch(
                message.partition, event.session_id, event.ts, ended=outcome.record.ended
            )
        for session_id in self._expiry.due(message.partition, event.ts):
            record = self._table.get(session_id.encode())
            if record is None:
                continue
            ended = SessionRecord.decode(record).ended
            self._delete(session_id.encode())
            self._metrics.expired.labels("ended" if ended else "idle").inc()

    def _write_back(self, table_key: bytes) -> None:
        """An event read again after a restart: write its session's stored value back,
        unchanged. A RocksDB store can hold a write whose changelog record the stopped
        worker never sent (records go out in batches); writing it again puts it in the
        changelog, so a later owner of the partition does not get an older state."""
        stored = self._table.get(table_key)
        if stored is not None:
            self._table[table_key] = stored

    def _remember(self, table_key: bytes, encoded: bytes, record: SessionRecord) -> None:
        self._decoded[table_key] = (encoded, record)
        self._decoded.move_to_end(table_key)
        if len(self._decoded) > MAX_DECODED_RECORDS:
            self._decoded.popitem(last=False)

    def _delete(self, table_key: bytes) -> None:
        self._decoded.pop(table_key, None)
        if table_key in self._table:
            del self._table[table_key]

    async def _publish(
        self, session_id: str, seq: int, payload: bytes, rule: str | None, produced_at: float | None
    ) -> None:
        key = session_id.encode()
        ident = (session_id, seq)
        token = self._inflight[ident] = object()
        # A failed send never calls back: the verdict stays unconfirmed in the table, and
        # the outputs stop the worker before the offset is committed.
        await self._outputs.send(
            self._verdicts_topic,
            key,
            payload,
            on_delivered=partial(self._on_sent, ident, token, produced_at),
        )
        if rule is not None:
            await self._outputs.send(self._warnings_topic, key, payload)

    def _on_sent(
        self, ident: tuple[str, int], token: object, produced_at: float | None, _offset: int
    ) -> None:
        if self._inflight.get(ident) is token:
            del self._inflight[ident]
        self._acked[ident] = None
        if len(self._acked) > MAX_REMEMBERED_ACKS:
            self._acked.popitem(last=False)
        if produced_at:
            self._metrics.observe_latency(max(0.0, time.time() - produced_at))

    async def _dead_letter(self, message: Any, letter: DeadLetter) -> None:
        self._metrics.dead_letters.labels(letter.kind).inc()
        source = SourcePosition(message.topic, message.partition, message.offset)
        log.warning(
            "dead letter %s at %s[%d]@%d: %s",
            letter.kind,
            source.topic,
            source.partition,
            source.offset,
            letter.reason,
        )
        await self._outputs.send(
            self._dead_letters_topic,
            message.key,
            message.value,
            headers=dead_letter_headers(letter, source),
        )

    async def dead_letter_policy(self, record: Any, error: InvalidPolicy) -> None:
        """An invalid record on the policy topic (an aiokafka ConsumerRecord): to the
        dead-letter topic with its error; the key's previous policy stays."""
        await self._dead_letter(record, DeadLetter("policy", str(error)))

    async def on_changelog_event(self, event: Any) -> None:
        """Recovery reads each changelog record: rebuild the expiry index from them."""
        message = event.message
        session_id = message.key.decode() if message.key else ""
        if message.value is None:
            self._expiry.forget(message.partition, session_id)
            return
        try:
            record = SessionRecord.decode(message.value)
        except (ValueError, KeyError, TypeError):
            return
        self._expiry.touch(message.partition, session_id, record.last_ts, ended=record.ended)

    def on_partitions_revoked(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._expiry.drop_partition(partition)


def _rule_of(payload: bytes) -> str | None:
    """The warning rule of a stored verdict (a resent warning goes to both topics again)."""
    warning = json.loads(payload).get("warning")
    return None if warning is None else str(warning["rule"])
