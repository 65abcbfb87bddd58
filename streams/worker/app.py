"""The faust app: `create_app(settings)` builds it; `app` (built on first access from the
environment) is what `faust -A loopwatch.streams.worker.app` loads.

Thin on purpose: topics, the `sessions` table, the events topic's records handed to the
record handler one at a time as the consumer fetches them (`faust_ext.inline`), and the
`/metrics` page. All detection happens in `streams.detector`, all per-record logic
in `streams.worker.pipeline` (carried out by `streams.worker.handler`).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from loopwatch.streams.kafka.batched_outputs import BatchedOutputs
from loopwatch.streams.kafka.expiry import ExpiryIndex
from loopwatch.streams.kafka.faust_ext.app import (
    app_crasher,
    guard_commits,
    new_app,
    started_producer,
    worker_ready,
)
from loopwatch.streams.kafka.faust_ext.batch_hand_off import YIELD_EVERY, BatchProgress
from loopwatch.streams.kafka.faust_ext.inline import inline_callback
from loopwatch.streams.kafka.faust_ext.offset_order import OffsetOrder
from loopwatch.streams.kafka.faust_ext.producer import partition_count
from loopwatch.streams.kafka.faust_ext.session_table import SessionTable, sessions_table
from loopwatch.streams.kafka.outputs import FaustOutputs, Outputs
from loopwatch.streams.kafka.topics import declare_topics
from loopwatch.streams.settings import Settings
from loopwatch.streams.worker.broker_outage import watch_broker
from loopwatch.streams.worker.commit_timing import CommitTiming
from loopwatch.streams.worker.commit_timing import install as install_commit_filter
from loopwatch.streams.worker.handler import RecordHandler
from loopwatch.streams.worker.lag import PartitionProgress, assigned_positions
from loopwatch.streams.worker.metrics import CONTENT_TYPE, Metrics
from loopwatch.streams.worker.pipeline import PipelineOptions
from loopwatch.streams.worker.policy_book import InvalidPolicy, PolicyBook
from loopwatch.streams.worker.policy_follower import PolicyDeadLetters, PolicyFollower
from loopwatch.streams.worker.readiness import ProcessingHealth, Readiness, serve_health
from loopwatch.streams.worker.table_store import TableSessionStore

TABLE_NAME = "sessions"
"""The changelog topic is `<app_id>-sessions-changelog` (created by `kafka_admin`)."""
COMMIT_BY_TIME_ONLY = 2**31 - 1
"""faust's `broker_commit_every`: acked records that start a commit, never reached. The
worker commits every `commit_interval_ms` from faust's commit task. faust's count-based
commit (every 10,000 acked records by default) runs inside the fetch loop, which then
processed nothing until the commit, with its session writes and flush, was done."""
GC_THRESHOLDS = (20_000, 20, 100)
"""The cyclic collector's thresholds from the first commit on (Python's: 700, 10, 10).
Events spread over many sessions decode a record each, and the decoded records kept for
the session's next event (`LOOPWATCH_SESSION_CACHE`, 4,096 by default) survive into the oldest
generation, whose full collection then ran every few hundred events: a tenth to a quarter
of a cold event's CPU (docs/performance.md §4, "The cold path"). A full
collection still runs every ~40M container allocations (~30 s of a cold backlog)."""


def create_app(
    settings: Settings, outputs: Outputs | None = None, *, follow_policies: bool = False
) -> Any:
    """A configured faust app for these settings (not started).

    `outputs`: where records go (tests pass a recording one); by default batched through
    faust's aiokafka producer, or faust's own sends under exactly_once.
    `follow_policies`: read the policy topic (docs/contract.md §9.7) in a task of the app
    and hold events until it has been read to its end once; otherwise every agent is
    judged by the settings' built-in policy.
    """
    app: Any = new_app(
        settings.app_id,
        settings,
        web_port=settings.web_port,
        # With a worker id (static membership) a restarted worker takes its partitions
        # back without a rebalance (docs/operations.md).
        consumer_group_instance_id=settings.worker_id,
        # faust's assignor asserts that the assignment a static member gets back names its
        # own URL (web host and port by default): a worker restarted on another port
        # crashed there, so with a worker id the URL is the id (faust's table routing,
        # its only other use, is not used here).
        **_canonical_url(settings),
        processing_guarantee=settings.processing_guarantee,
        broker_commit_interval=settings.commit_interval_ms / 1000,
        broker_commit_every=COMMIT_BY_TIME_ONLY,
    )
    metrics = Metrics()
    topics = declare_topics(
        app,
        events=settings.events_topic,
        verdicts=settings.verdicts_topic,
        warnings=settings.warnings_topic,
        dead_letters=settings.dlq_topic,
        episodes=settings.episodes_topic,
        partitions=settings.partitions,
        verdict_partitions=settings.verdict_partitions,
    )
    expiry = ExpiryIndex(
        idle_ttl=timedelta(seconds=settings.session_ttl_seconds),
        ended_retention=timedelta(seconds=settings.ended_retention_seconds),
    )
    table, on_changelog = sessions_table(
        app, TABLE_NAME, partitions=settings.partitions, cache_mb=settings.rocksdb_cache_mb
    )
    if outputs is None:
        outputs = _default_outputs(app, settings, topics, table)
    # under exactly_once faust's transaction manager writes the changelog
    table.outputs = None if isinstance(outputs, FaustOutputs) else outputs
    policies, follower = _policies(app, settings, metrics, follow=follow_policies)
    # Deferred writes: one table write (changelog record) per session per offset commit,
    # made just before the commit's flush (not under exactly_once: faust's transactions
    # write the changelog with each event there).
    store = TableSessionStore(
        table, deferred=table.outputs is not None, max_decoded=settings.session_cache
    )
    handler = RecordHandler(
        store=store,
        topics=topics,
        outputs=outputs,
        options=PipelineOptions(
            detection=settings.detection,
            max_event_bytes=settings.max_event_bytes,
            drop_ended=settings.ended_retention_seconds == 0,
            policies=policies,
        ),
        policies_loaded=None if follower is None else follower.loaded,
        expiry=expiry,
        metrics=metrics,
        # the topic's count as it is (an existing topic keeps its own), not the setting
        verdict_partitions=lambda: partition_count(started_producer(app), settings.verdicts_topic),
        writing_in=table.writing_in,
    )
    app.task(handler.sweep_carried_over)
    on_changelog.target = handler.on_changelog_records
    timing = CommitTiming(metrics.registry, settings.commit_interval_ms / 1000)
    install_commit_filter(timing)
    _guard_commits(
        app,
        store,
        outputs,
        timing,
        fetch_wait_ms=settings.fetch_wait_ms,
        changelog_batches=settings.changelog_batches,
    )
    metrics.active_sessions.set_function(lambda: float(expiry.sessions()))
    metrics.worker_ready.set_function(lambda: 1.0 if worker_ready(app) else 0.0)

    order = OffsetOrder(app)
    health = ProcessingHealth()

    _process_events_inline(
        app, topics.events, table=table, order=order, handler=handler, health=health,
        outputs=outputs, batches=settings.batch_hand_off,
    )  # fmt: skip

    events_topic = settings.events_topic

    async def on_revoked(sender: Any, revoked: Any, **_: Any) -> None:
        partitions = {tp.partition for tp in revoked if tp.topic == events_topic}
        handler.on_partitions_revoked(partitions)
        store.forget_partitions(partitions)
        order.forget(set(revoked))

    async def heal_stalled_partitions() -> None:
        await order.heal(events_topic)

    app.timer(interval=1.0, name="loopwatch.offset_order")(heal_stalled_partitions)

    progress = PartitionProgress(metrics)

    async def measure_lag() -> None:
        positions = assigned_positions(app.consumer, events_topic, order.next_offset)
        progress.update(positions, rebalancing=bool(app.rebalancing))

    app.timer(interval=5.0, name="loopwatch.partition_lag")(measure_lag)

    app.on_partitions_revoked.connect(on_revoked)

    async def metrics_page(web: Any, request: Any) -> Any:
        return web.bytes(metrics.exposition(), content_type=CONTENT_TYPE)

    app.page("/metrics")(metrics_page)

    # Broker outages: one log line at the start, a summary every 30 s, one at the end
    # (the worker command puts the log filter on aiokafka's loggers).
    outage = watch_broker(app, metrics.registry)
    producer_failed = (lambda: outputs.failed) if isinstance(outputs, BatchedOutputs) else bool
    readiness = Readiness(
        app,
        events_topic,
        outage,
        producer_failed,
        health,
        # `rocksdb://`: a restored partition compacts before it is processed (rocksdb_restore)
        compacting=lambda: getattr(table.data, "compacting", frozenset()),
    )
    serve_health(app, readiness, metrics.registry)
    app.loopwatch_outage = outage
    app.loopwatch_metrics = metrics
    app.loopwatch_topics = topics
    app.loopwatch_table = table
    app.loopwatch_store = store
    app.loopwatch_handler = handler
    app.loopwatch_outputs = outputs
    return app


def _process_events_inline(
    app: Any,
    topic: Any,
    *,
    table: SessionTable,
    order: OffsetOrder,
    handler: RecordHandler,
    health: ProcessingHealth,
    outputs: Outputs,
    batches: bool = False,
) -> None:
    """Hand each record of `topic` to `handler` as the consumer fetches it, one at a time
    and in offset order per partition (`streams.kafka.faust_ext.inline`: no faust stream),
    or with `batches` a fetched batch per partition at a time, each record to `handler`
    in the same order (`streams.kafka.faust_ext.batch_hand_off`)."""

    crash = app_crasher(app)

    async def handle_fetched(message: Any) -> None:
        if order.check(message.tp, message.offset):
            order.busy = True
            try:
                # the table's partition is the record's (faust takes it from the
                # current event, which only a stream sets)
                with table.writing_in(message.partition):
                    await handler.handle(message)
            except Exception as exc:
                # Not a bad record (those are dead letters: process_record never raises)
                # but e.g. the outputs failing: the worker stops, its offset uncommitted;
                # a restart reads the record again. /ready and the metric say why.
                health.crashed(exc)
                crash(exc)
                raise
            finally:
                order.busy = False
            order.processed(message.tp, message.offset)
        health.processed += 1

    async def handle_batch(tp: Any, messages: Sequence[Any], progress: BatchProgress) -> None:
        """`handle_fetched` for each record of a partition's batch, with the table's
        partition and the offset guard's busy flag set once; stops at a rebalance
        (`progress.go_on()`) and at a record the offset guard holds back."""
        consumer = app.consumer
        order.busy = True
        try:
            with table.writing_in(tp.partition):
                for message in messages:
                    if not progress.go_on():
                        return
                    consumer.fetched_waiting -= 1
                    offset = message.offset
                    if not order.check(tp, offset):
                        return  # held back, unacked: the guard re-reads from the gap
                    try:
                        await handler.handle(message)
                    except Exception as exc:  # as in handle_fetched
                        health.crashed(exc)
                        crash(exc)
                        raise
                    order.processed(tp, offset)
                    health.processed += 1
                    progress.done += 1
                    if not progress.done % YIELD_EVERY:
                        await asyncio.sleep(0)  # a turn for the heartbeat, the web page
        finally:
            order.busy = False

    if isinstance(outputs, BatchedOutputs):  # a backlog: batches grow for the linger
        outputs.input_waiting = lambda: app.consumer.fetched_waiting > 0
    if batches:
        app.topics.process_in_batches(topic, handle_batch)
    else:
        app.topics.process_inline(topic, inline_callback(app, handle_fetched))
    app.loopwatch_handle_fetched = handle_fetched
    app.loopwatch_handle_batch = handle_batch


def _guard_commits(
    app: Any,
    store: TableSessionStore,
    outputs: Outputs,
    timing: CommitTiming,
    *,
    fetch_wait_ms: int,
    changelog_batches: bool = False,
) -> None:
    """Before each offset commit: the sessions' noted records to the table, then the
    outputs' flush (which covers their changelog records), so an offset is committed
    only after its event's session record and verdict are acknowledged. The records are
    written a few dozen per loop turn, so events go on being processed in between (the
    offsets this commit covers were fixed before the hook runs). How long that takes goes
    to `timing` (`loopwatch_commit_seconds`, in place of faust's overlap warnings).

    The first commit also moves every object alive then (the modules, faust's and
    aiokafka's machinery: ~90,000 of them) out of the cyclic garbage collector's reach
    (`gc.freeze()`): each full collection traversed them all and held the event loop for
    50-200 ms every few seconds, the largest single stall of a verdict (docs/performance.md,
    "The tail"). Frozen objects are still freed by reference counting. Only with the
    worker's own outputs: a test that passes recording outputs shares its process."""
    frozen = not isinstance(outputs, BatchedOutputs)

    async def before_commit() -> None:
        nonlocal frozen
        if not frozen:
            frozen = True
            gc.freeze()
            gc.set_threshold(*GC_THRESHOLDS)
        started = time.monotonic()
        await store.write_pending_in_turns()
        await outputs.flush()
        timing.observe(time.monotonic() - started)

    guard_commits(
        app, before_commit, fetch_wait_ms=fetch_wait_ms, changelog_batches=changelog_batches
    )


def _canonical_url(settings: Settings) -> dict[str, Any]:
    return {"canonical_url": f"http://{settings.worker_id}"} if settings.worker_id else {}


def _policies(
    app: Any, settings: Settings, metrics: Metrics, *, follow: bool
) -> tuple[PolicyBook, PolicyFollower | None]:
    """The policies in force and, when `follow`, the app's tasks that keep them in step
    with the policy topic and dead-letter its invalid records (once per fleet)."""
    policies = PolicyBook(settings.detection)
    if not follow:
        return policies, None

    def on_dead_lettered(_record: Any, _error: InvalidPolicy) -> None:
        metrics.dead_letters.labels("policy").inc()

    follower = PolicyFollower(settings, policies)
    app.task(follower.run)
    app.task(PolicyDeadLetters(settings, on_dead_lettered).run)
    return policies, follower


def _default_outputs(app: Any, settings: Settings, topics: Any, table: SessionTable) -> Outputs:
    if settings.processing_guarantee == "exactly_once":
        faust_topics = (topics.verdicts, topics.warnings, topics.dead_letters, topics.episodes)
        return FaustOutputs({topic.get_topic_name(): topic for topic in faust_topics})
    return BatchedOutputs(
        lambda: started_producer(app),
        linger=settings.output_linger_ms / 1000,
        on_failure=app_crasher(app),
        on_delivered_batch=table.on_changelog_delivered,
    )


_built: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    # `faust -A loopwatch.streams.worker.app` wants a module-level app; building it at
    # import time would read the environment whenever anything imports this module.
    if name == "app":
        built = _built.get("app")
        if built is None:
            built = _built["app"] = create_app(Settings.from_env())
        return built
    raise AttributeError(name)
