"""The bridge's faust app: the worker's app class, table class, batched outputs and offset
guard, with its own app id (consumer group), topics and `otel-sessions` table.

Two agents with concurrency 1: `rekey` reads the exporter's topic, `order` reads the
re-keyed span records (co-partitioned with the table's changelog). A timer sends a tick
to every partition of the re-keyed topic each second (`streams.otel.bridge`).
"""

from __future__ import annotations

import time
from typing import Any

from loopwatch.streams.kafka.batched_outputs import BatchedOutputs
from loopwatch.streams.kafka.faust_ext.app import (
    app_crasher,
    guard_commits,
    new_app,
    started_producer,
)
from loopwatch.streams.kafka.faust_ext.offset_order import OffsetOrder
from loopwatch.streams.kafka.faust_ext.session_table import SessionTable, sessions_table
from loopwatch.streams.kafka.outputs import Outputs
from loopwatch.streams.kafka.topics import raw_topic
from loopwatch.streams.otel.bridge import OtelBridge, tick_value
from loopwatch.streams.otel.settings import TABLE_NAME, OtelSettings

TICK_SECONDS = 1.0
"""How often windows are checked when no span arrives (a window closes up to this late)."""


def create_bridge_app(settings: OtelSettings, outputs: Outputs | None = None) -> Any:
    """A configured faust app for the bridge (not started)."""
    base = settings.base
    app: Any = new_app(
        settings.app_id,
        base,
        web_port=settings.web_port,
        # Replays are harmless by construction (span ids and the horizon in the state).
        processing_guarantee="at_least_once",
    )

    # allow_empty: a null value must reach the handler (and the DLQ)
    exported = raw_topic(app, settings.spans_topic, allow_empty=True)
    rekeyed = raw_topic(app, settings.internal_topic, allow_empty=True)
    table, on_changelog = sessions_table(
        app, TABLE_NAME, partitions=base.partitions, cache_mb=base.rocksdb_cache_mb
    )
    if outputs is None:
        outputs = _batched_outputs(app, base.output_linger_ms / 1000, table)
    table.outputs = outputs
    bridge = OtelBridge(table=table, outputs=outputs, settings=settings)
    on_changelog.target = bridge.on_changelog_records
    # records stored before each offset commit
    guard_commits(app, outputs.flush, fetch_wait_ms=base.fetch_wait_ms)

    def in_offset_order(name: str, handler: Any, topic: str) -> None:
        order = OffsetOrder(app)

        async def consume_in_order(stream: Any) -> None:
            async for event in stream.events():
                message = event.message
                if order.check(message.tp, message.offset):
                    order.busy = True
                    try:
                        await handler(message)
                    finally:
                        order.busy = False
                    order.processed(message.tp, message.offset)

        async def heal() -> None:
            await order.heal(topic)

        async def on_revoked(sender: Any, revoked: Any, **_: Any) -> None:
            order.forget(set(revoked))

        app.agent(exported if topic == settings.spans_topic else rekeyed, name=name)(
            consume_in_order
        )
        app.timer(interval=1.0, name=f"{name}.offset_order")(heal)
        app.on_partitions_revoked.connect(on_revoked, weak=False)

    in_offset_order("loopwatch.otel.rekey", bridge.on_export_record, settings.spans_topic)
    in_offset_order("loopwatch.otel.order", bridge.on_span_record, settings.internal_topic)

    async def on_revoked(sender: Any, revoked: Any, **_: Any) -> None:
        internal = settings.internal_topic
        bridge.on_partitions_revoked({tp.partition for tp in revoked if tp.topic == internal})

    app.on_partitions_revoked.connect(on_revoked, weak=False)

    async def tick() -> None:
        value = tick_value(int(time.time() * 1000))
        for partition in range(base.partitions):
            await app.producer.send(settings.internal_topic, None, value, partition, None, None)

    app.timer(interval=TICK_SECONDS, name="loopwatch.otel.tick")(tick)

    async def metrics_page(web: Any, request: Any) -> Any:
        return web.bytes(bridge.counters.exposition(), content_type="text/plain; version=0.0.4")

    app.page("/metrics")(metrics_page)
    app.loopwatch_bridge = bridge
    return app


def _batched_outputs(app: Any, linger: float, table: SessionTable) -> BatchedOutputs:
    return BatchedOutputs(
        lambda: started_producer(app),
        linger=linger,
        on_failure=app_crasher(app),
        on_delivered_batch=table.on_changelog_delivered,
    )
