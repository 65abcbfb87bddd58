"""The record handler: runs `process_record` for each `agent-events` record and carries
its outcome out to the outputs (verdicts, warnings, dead letters) and the metrics.

One instance per app, called by the faust agent, which runs with concurrency 1 (faust
loses offsets with more, and the table must see a session's events in order). The
session table is written by `process_record` through `TableSessionStore` while the
record is current, as faust requires. Sessions due beyond what one record may sweep are
deleted by `sweep_carried_over` (an app task), a step per event-loop turn, with the
partition's table writes made current as the offset commit's writes are.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pydantic_core

from loopwatch.models import reply_partition
from loopwatch.streams.kafka.dead_letters import DeadLetter, send_dead_letter
from loopwatch.streams.kafka.expiry import ExpiryIndex, index_changelog_records
from loopwatch.streams.kafka.outputs import Outputs
from loopwatch.streams.kafka.topics import Topics
from loopwatch.streams.worker.metrics import Metrics
from loopwatch.streams.worker.pipeline import (
    Duplicate,
    PipelineOptions,
    Processed,
    Rejected,
    process_record,
    sweep,
)
from loopwatch.streams.worker.record import record_times
from loopwatch.streams.worker.table_store import TableSessionStore

log = logging.getLogger(__name__)


class RecordHandler:
    """Processes `agent-events` records against the `sessions` table."""

    def __init__(
        self,
        *,
        store: TableSessionStore,
        topics: Topics,
        outputs: Outputs,
        options: PipelineOptions,
        expiry: ExpiryIndex,
        metrics: Metrics,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        policies_loaded: asyncio.Event | None = None,
        verdict_partitions: Callable[[], Awaitable[int]] | None = None,
        writing_in: Callable[[int], AbstractContextManager[None]] = lambda _: nullcontext(),
    ) -> None:
        """`verdict_partitions()`: the verdicts topic's partition count as the broker has it
        (asked once, at the first event with a reply-partition header); by default the
        count the topic was declared with. `writing_in(partition)`: makes that partition's
        table writes current (`SessionTable.writing_in`) for the sweep between records."""
        self._store = store
        self._outputs = outputs
        self._verdicts_topic: str = topics.verdicts.get_topic_name()
        self._warnings_topic: str = topics.warnings.get_topic_name()
        self._dead_letters_topic: str = topics.dead_letters.get_topic_name()
        self._episodes_topic: str = topics.episodes.get_topic_name()
        self._options = options
        self._expiry = expiry
        self._metrics = metrics
        self.clock = clock
        """The worker's clock: stamps verdicts, and bounds the idle sweep (tests set it)."""
        # Set once the policy topic has been read to its end at start-up: events wait for
        # it, so none is judged by a policy older than what the topic held.
        self._policies_loaded = policies_loaded
        declared = int(topics.verdicts.partitions or 1)
        self._count_verdict_partitions = verdict_partitions or _constant(declared)
        self._verdict_partitions: int | None = None
        self._writing_in = writing_in
        self._sweep_wanted = asyncio.Event()

    async def handle(self, message: Any) -> None:
        """Handle one record of the events topic (a faust `Message`: raw key and value,
        topic, partition, offset, timestamp, headers)."""
        if self._policies_loaded is not None and not self._policies_loaded.is_set():
            await self._policies_loaded.wait()
        outcome = process_record(
            message.key,
            message.value,
            self._store,
            self._options,
            self._expiry,
            partition=message.partition,
            now=self.clock(),
            log_time=message.timestamp or None,  # the Kafka timestamp: the sweep's clock
        )
        if self._expiry.carried_over():
            self._sweep_wanted.set()
        if isinstance(outcome, Rejected):
            await self._dead_letter(message, outcome.letter)
            return
        event = outcome.event
        reply = await self._reply_partition(message.headers) if message.headers else None
        if isinstance(outcome, Duplicate):
            if outcome.replayed:
                self._store.write_back(event.session_id)
            if outcome.resend is not None:
                self._metrics.resent.inc()
                rule = _rule_of(outcome.resend)
                await self._publish(
                    event.session_id,
                    event.seq,
                    outcome.resend,
                    rule,
                    message.timestamp,
                    episodes=outcome.resend_episodes,
                    reply=reply,
                )
            else:
                self._metrics.duplicates.inc()
            return
        self._metrics.count_event(event.type)
        warning = outcome.verdict.warning
        rule = None if warning is None else warning.rule
        # The stored record lists the verdict and the loop episodes its event closed as
        # unconfirmed until the broker acknowledges them all, so a crash cannot lose them.
        await self._publish(
            event.session_id,
            event.seq,
            outcome.payload,
            rule,
            message.timestamp,
            episodes=outcome.episode_payloads,
            reply=reply,
        )
        metrics = self._metrics
        if warning is not None:
            metrics.count_warning(warning.rule, event.agent_id)
        metrics.count_verdict()
        if outcome.verdict.state_reset:
            metrics.state_resets.inc()
        if outcome.record is None:
            metrics.count_expired("ended")
        for _session_id, ended in outcome.expired:
            metrics.count_expired("ended" if ended else "idle")
        if outcome.new_session or outcome.opened or outcome.episodes or outcome.expired_episodes:
            await self._loops(outcome)

    async def _loops(self, outcome: Processed) -> None:
        """Loop metrics; the open episodes of sessions that expired go out as `expired`
        (before their tombstones are acknowledged, the offset commit waits for both;
        docs/contract.md §8 names the crash window this leaves)."""
        metrics = self._metrics
        if outcome.new_session:
            metrics.count_session(outcome.event.agent_id)
        for opened in outcome.opened:
            metrics.loop_started(opened, first_in_session=outcome.first_loop)
        for episode in (*outcome.episodes, *outcome.expired_episodes):
            metrics.loop_ended(episode)
        for episode in outcome.expired_episodes:
            key = episode.session_id.encode()
            await self._outputs.send(self._episodes_topic, key, episode.to_json())

    async def sweep_carried_over(self) -> None:
        """The worker's task: delete the sessions that records left due beyond their own
        sweep (`pipeline.SWEEP_PER_STEP` each), one step of as many per partition per
        event-loop turn, so that events keep being processed in between. Their tombstones
        are noted (or, without deferred writes, written) under the partition as the
        commit's writes are; their open loops go out `expired` as a record's would."""
        expiry = self._expiry
        while True:
            await self._sweep_wanted.wait()
            self._sweep_wanted.clear()
            while carried := expiry.carried_over():
                for partition in sorted(carried):
                    try:
                        with self._writing_in(partition):
                            swept = sweep(self._store, expiry, partition)
                    except Exception:  # as in a record's sweep: it must not stop the worker
                        log.exception("sweeping partition %d", partition)
                        expiry.stop_carrying(partition)  # its next record sweeps again
                        continue
                    for _session_id, ended in swept.expired:
                        self._metrics.count_expired("ended" if ended else "idle")
                    for episode in swept.episodes:
                        self._metrics.loop_ended(episode)
                        key = episode.session_id.encode()
                        await self._outputs.send(self._episodes_topic, key, episode.to_json())
                    await asyncio.sleep(0)  # a turn for the events waiting

    async def _publish(
        self,
        session_id: str,
        seq: int,
        payload: bytes,
        rule: str | None,
        produced_at: float | None,
        *,
        episodes: tuple[bytes, ...],
        reply: int | None = None,
    ) -> None:
        """`reply`: the verdicts partition the event named (None: by key). Only the
        verdict goes there; its warning and episodes are keyed as always."""
        key = session_id.encode()
        ident = (session_id, seq)
        records = 1 + (rule is not None) + len(episodes)
        token = self._store.deliveries.sending(ident, records)
        delivered = partial(self._store.deliveries.delivered, ident, token)
        # A failed send never calls back: the verdict stays unconfirmed in the table, and
        # the outputs stop the worker before the offset is committed.
        await self._outputs.send(
            self._verdicts_topic,
            key,
            payload,
            on_delivered=partial(self._on_verdict_sent, delivered, produced_at),
            partition=reply,
        )
        if rule is not None:
            await self._outputs.send(
                self._warnings_topic, key, payload, on_delivered=lambda _offset: delivered()
            )
        for episode in episodes:
            await self._outputs.send(
                self._episodes_topic, key, episode, on_delivered=lambda _offset: delivered()
            )

    async def _reply_partition(self, headers: Any) -> int | None:
        """The verdicts partition an event's reply header names (docs/contract.md §5.1);
        None (by key) without one, or for a bad one (counted, never raised). A resent
        verdict goes where the replayed event's header says: the header is part of the
        event record, so the resend needs nothing stored (streams.worker.record)."""
        partitions = self._verdict_partitions
        if partitions is None:
            try:
                partitions = await self._count_verdict_partitions()
            except Exception as exc:  # no metadata now: by key, and ask again next time
                log.warning("verdicts topic partitions unknown (%s); by key", type(exc).__name__)
                self._metrics.reply_ignored.labels("unknown_partitions").inc()
                return None
            self._verdict_partitions = partitions
        partition, problem = reply_partition(headers, partitions)
        if problem is not None:
            self._metrics.reply_ignored.labels(problem).inc()
        return partition

    def _on_verdict_sent(
        self, delivered: Callable[[], None], produced_at: float | None, _offset: int
    ) -> None:
        delivered()
        if produced_at:
            self._metrics.observe_latency(max(0.0, time.time() - produced_at))

    async def _dead_letter(self, message: Any, letter: DeadLetter) -> None:
        self._metrics.dead_letters.labels(letter.kind).inc()
        await send_dead_letter(self._outputs, self._dead_letters_topic, message, letter)

    def on_changelog_records(self, messages: list[Any]) -> None:
        """Recovery reads changelog records: rebuild the expiry index from them (reading
        only the times of each record, not its state)."""
        index_changelog_records(self._expiry, messages, record_times)

    def on_partitions_revoked(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._expiry.drop_partition(partition)


def _constant(value: int) -> Callable[[], Awaitable[int]]:
    async def count() -> int:
        return value

    return count


def _rule_of(payload: bytes) -> str | None:
    """The warning rule of a stored verdict (a resent warning goes to both topics again)."""
    warning = pydantic_core.from_json(payload).get("warning")
    return None if warning is None else str(warning["rule"])
