"""The per-record pipeline (`process_record`) driven as the worker drives it, without
faust or Kafka: the unit-test setup of tests/unit/worker/ (test_pipeline,
test_deferred_writes, test_record_guard, test_write_in_turns)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from loopwatch.models import AgentEvent, DetectionConfig
from loopwatch.streams.kafka.expiry import ExpiryIndex, epoch_seconds
from loopwatch.streams.kafka.faust_ext.session_table import Write, write_each
from loopwatch.streams.worker.pipeline import (
    Duplicate,
    Outcome,
    PipelineOptions,
    Processed,
    Rejected,
    process_record,
)
from loopwatch.streams.worker.record import SessionRecord
from loopwatch.streams.worker.store import MemorySessionStore
from loopwatch.streams.worker.table_store import MAX_DECODED_RECORDS, TableSessionStore

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
"""The worker's clock for a record without a timestamp (records are stamped with their
event's `ts`, and read at once, unless a test says otherwise)."""

Record = tuple[bytes | None, bytes | None]
"""One record of the events topic: key and value."""

Sent = tuple[str, int, bytes]
"""A verdict send: session id, seq, payload."""

Store = TypeVar("Store", MemorySessionStore, TableSessionStore)


def options(max_event_bytes: int = 4096, *, drop_ended: bool = False) -> PipelineOptions:
    """The pipeline's options under the default detection config."""
    return PipelineOptions(DetectionConfig(), max_event_bytes, drop_ended=drop_ended)


def expiry_index(ended: timedelta = timedelta(minutes=1)) -> ExpiryIndex:
    """An expiry index: idle sessions after an hour, ended ones after `ended`."""
    return ExpiryIndex(timedelta(hours=1), ended)


def stamped(value: bytes | None) -> float | None:
    """The epoch seconds of the event `ts` in `value` (None if there is none)."""
    try:
        return epoch_seconds(datetime.fromisoformat(json.loads(value or b"")["ts"]))
    except (ValueError, KeyError, TypeError, RecursionError):  # bad records, on purpose
        return None


def record_of(event: AgentEvent) -> Record:
    return event.session_id.encode(), event.model_dump_json().encode()


class FakeTable(dict[bytes, bytes]):
    """A dict with the two calls deferred writes make of the faust table."""

    def __init__(self) -> None:
        super().__init__()
        self.partition = 0
        self.changelog: list[tuple[int, bytes, bytes | None]] = []
        self.reads = 0
        """`stored` calls (the store's reads)."""

    def current_partition(self) -> int:
        return self.partition

    @contextlib.contextmanager
    def writing_in(self, partition: int) -> Iterator[None]:
        before, self.partition = self.partition, partition
        try:
            yield
        finally:
            self.partition = before

    def stored(self, key: bytes) -> bytes | None:
        self.reads += 1
        return self.get(key)

    def write_all(self, partition: int, writes: Sequence[Write]) -> None:
        with self.writing_in(partition):
            write_each(self, writes)

    def __setitem__(self, key: bytes, value: bytes) -> None:
        super().__setitem__(key, value)
        self.changelog.append((self.partition, key, value))

    def __delitem__(self, key: bytes) -> None:
        super().__delitem__(key)
        self.changelog.append((self.partition, key, None))


@dataclass
class Pipeline(Generic[Store]):
    """One process's pipeline: a session store, an expiry index, and its verdict sends
    (each one's records as `RecordHandler.handle` sends them), acknowledged at once
    unless `hold_acks` is set."""

    store: Store
    options: PipelineOptions = field(default_factory=options)
    expiry: ExpiryIndex = field(default_factory=expiry_index)
    hold_acks: bool = False
    sent: list[Sent] = field(default_factory=list)
    held: dict[tuple[str, int], object] = field(default_factory=dict)
    """The tokens of the sends not acknowledged (`hold_acks`), for `ack`."""

    @property
    def payloads(self) -> list[bytes]:
        """The verdicts sent, in order."""
        return [payload for _, _, payload in self.sent]

    def ack(self, seq: int, session_id: str = "s1") -> None:
        """The broker acknowledges the held send of that event's verdict."""
        ident = (session_id, seq)
        self.store.deliveries.delivered(ident, self.held.pop(ident))

    def process(
        self,
        key: bytes | None,
        value: bytes | None,
        partition: int = 0,
        log_time: float | None = None,
        now: datetime | None = None,
    ) -> Outcome:
        """One record through `process_record`, and its verdict (or resend) sent. The
        record's Kafka timestamp is `log_time`, by default its event's `ts` (a producer
        that publishes each event as it happens); the worker's clock is `now`, by default
        that timestamp (read at once), else `NOW`."""
        stamp = stamped(value) if log_time is None else log_time
        if now is None:
            now = NOW if stamp is None else datetime.fromtimestamp(stamp, UTC)
        outcome = process_record(
            key,
            value,
            self.store,
            self.options,
            self.expiry,
            partition=partition,
            now=now,
            log_time=stamp,
        )
        payload = None
        if isinstance(outcome, Processed):
            payload = outcome.payload
        elif isinstance(outcome, Duplicate):
            payload = outcome.resend
        if payload is not None and not isinstance(outcome, Rejected):
            event = outcome.event
            ident = (event.session_id, event.seq)
            token = self.store.deliveries.sending(ident)
            self.sent.append((event.session_id, event.seq, payload))
            if self.hold_acks:
                self.held[ident] = token
            else:
                self.store.deliveries.delivered(ident, token)
        return outcome

    def run(self, records: Iterable[Record], partition: int = 0) -> list[Outcome]:
        return [self.process(key, value, partition) for key, value in records]

    def run_events(self, events: Iterable[AgentEvent]) -> list[Outcome]:
        return self.run(record_of(event) for event in events)


def over_table(
    table: FakeTable | dict[bytes, bytes],
    *,
    deferred: bool = False,
    pipeline_options: PipelineOptions | None = None,
    expiry: ExpiryIndex | None = None,
    partition_of: Callable[[bytes], int] = lambda key: 0,
    max_decoded: int = MAX_DECODED_RECORDS,
) -> Pipeline[TableSessionStore]:
    """A pipeline over `table` as the worker has it (`TableSessionStore`, keeping
    `max_decoded` decoded records), its expiry index rebuilt from the table's records as
    recovery does."""
    index = expiry_index() if expiry is None else expiry
    for key, value in table.items():
        record = SessionRecord.decode(value)
        index.touch_at(
            partition_of(key),
            key.decode(),
            record.seen_at,
            ended=record.ended,
            wall=record.seen_wall,
        )
    return Pipeline(
        TableSessionStore(table, deferred=deferred, max_decoded=max_decoded),
        options=options() if pipeline_options is None else pipeline_options,
        expiry=index,
    )
