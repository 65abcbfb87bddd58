"""The faust app: `create_app(settings)` builds it; `app` (built on first access from the
environment) is what `faust -A streams.app` loads.

Thin on purpose: topics, the `sessions` table, one faust agent with concurrency 1 and
the `/metrics` page. All detection happens in `streams.detector`, all per-record logic
in `streams.processing` (carried out by `streams.record_handler`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from streams.expiry import ExpiryIndex
from streams.faust_ext.app import (
    GuardedEvent,
    LoopwatchApp,
    guard_commits,
    started_producer,
    worker_ready,
)
from streams.faust_ext.offset_guard import OffsetOrder
from streams.faust_ext.session_table import SessionTable
from streams.lag import PartitionProgress, assigned_positions
from streams.metrics import CONTENT_TYPE, Metrics
from streams.outputs import BatchedOutputs, FaustOutputs, Outputs
from streams.processing import PipelineOptions
from streams.record_handler import RecordHandler
from streams.session_store import TableSessionStore
from streams.settings import Settings
from streams.topics import declare_topics

TABLE_NAME = "sessions"
"""The changelog topic is `<app_id>-sessions-changelog` (created by `kafka_admin`)."""


def create_app(settings: Settings, outputs: Outputs | None = None) -> Any:
    """A configured faust app for these settings (not started).

    `outputs`: where records go (tests pass a recording one); by default batched through
    faust's aiokafka producer, or faust's own sends under exactly_once.
    """
    app: Any = LoopwatchApp(
        settings.app_id,
        Event=GuardedEvent,
        Table=SessionTable,
        broker=[f"kafka://{server}" for server in settings.bootstrap_servers.split(",")],
        **settings.faust_security(),
        store=settings.store_url,
        datadir=settings.data_dir,
        topic_partitions=settings.partitions,
        # Topics are created by `streams.kafka_admin`; the broker has auto-create off.
        topic_allow_declare=False,
        topic_disable_leader=True,
        # No standby replicas: a partition that moves recovers from its changelog.
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        processing_guarantee=settings.processing_guarantee,
        producer_acks=-1,
        # 5 ms linger for what faust itself produces (everything under exactly_once; the
        # batched outputs linger on their own).
        producer_linger=0.005,
        # 256 KiB batches (aiokafka's default is 16 KiB): aiokafka keeps one produce
        # request in flight and one batch per partition in it, so a partition's records
        # beyond one batch wait a round trip each; session records are ~1-5 KB.
        producer_max_batch_size=256 * 1024,
        web_enabled=True,
        web_bind=settings.web_host,
        web_port=settings.web_port,
        autodiscover=False,
        # Raw bytes everywhere (the table's changelog too): `models` owns the encoding.
        key_serializer="raw",
        value_serializer="raw",
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
    )
    expiry = ExpiryIndex(
        idle_ttl=timedelta(seconds=settings.session_ttl_seconds),
        ended_retention=timedelta(seconds=settings.ended_retention_seconds),
    )
    # The handler is built after the table, which calls back into it on recovery.
    holder: dict[str, RecordHandler] = {}

    async def on_changelog_event(event: Any) -> None:
        await holder["handler"].on_changelog_event(event)

    table = app.Table(
        TABLE_NAME,
        key_type=bytes,
        value_type=bytes,
        partitions=settings.partitions,
        on_changelog_event=on_changelog_event,
    )
    if outputs is None:
        outputs = _default_outputs(app, settings, topics, table)
    if isinstance(outputs, FaustOutputs):
        table.outputs = None  # faust's transaction manager writes the changelog
    else:
        table.outputs = outputs
    handler = RecordHandler(
        store=TableSessionStore(table),
        topics=topics,
        outputs=outputs,
        options=PipelineOptions(
            detection=settings.detection,
            max_event_bytes=settings.max_event_bytes,
            drop_ended=settings.ended_retention_seconds == 0,
        ),
        expiry=expiry,
        metrics=metrics,
    )
    holder["handler"] = handler
    guard_commits(app, outputs.flush)
    metrics.active_sessions.set_function(lambda: float(expiry.sessions()))
    metrics.worker_ready.set_function(lambda: 1.0 if worker_ready(app) else 0.0)

    order = OffsetOrder(app)

    async def process_events(stream: Any) -> None:
        async for event in stream.events():
            message = event.message
            if order.check(message.tp, message.offset):
                order.busy = True
                try:
                    await handler.process(event)
                finally:
                    order.busy = False
                order.processed(message.tp, message.offset)

    app.agent(topics.events, name="loopwatch.process_events", concurrency=1)(process_events)

    events_topic = settings.events_topic

    async def on_revoked(sender: Any, revoked: Any, **_: Any) -> None:
        handler.on_partitions_revoked({tp.partition for tp in revoked if tp.topic == events_topic})
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
    app.loopwatch_metrics = metrics
    app.loopwatch_topics = topics
    app.loopwatch_table = table
    return app


def _default_outputs(app: Any, settings: Settings, topics: Any, table: SessionTable) -> Outputs:
    if settings.processing_guarantee == "exactly_once":
        faust_topics = (topics.verdicts, topics.warnings, topics.dead_letters, topics.episodes)
        return FaustOutputs({topic.get_topic_name(): topic for topic in faust_topics})
    crashes: set[asyncio.Future[Any]] = set()

    def crash(exc: BaseException) -> None:
        task = asyncio.ensure_future(app.crash(exc))
        crashes.add(task)
        task.add_done_callback(crashes.discard)

    return BatchedOutputs(
        lambda: started_producer(app),
        linger=settings.output_linger_ms / 1000,
        on_failure=crash,
        on_delivered_batch=table.on_changelog_delivered,
    )


_built: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    # `faust -A streams.app` wants a module-level app; building it at import time would
    # read the environment whenever anything imports this module.
    if name == "app":
        built = _built.get("app")
        if built is None:
            built = _built["app"] = create_app(Settings.from_env())
        return built
    raise AttributeError(name)
