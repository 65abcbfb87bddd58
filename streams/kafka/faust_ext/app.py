"""The faust app, event and worker classes of loopwatch's apps (the detector worker and
the OTel bridge), and the explicit hook-up of the guarded consumer and the producer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from time import monotonic
from typing import Any

import faust

from loopwatch.streams.kafka.faust_ext.inline import InlineConductor
from loopwatch.streams.kafka.faust_ext.offset_guard import GuardedTransport
from loopwatch.streams.kafka.faust_ext.recovery_progress import ProgressTableManager
from loopwatch.streams.kafka.faust_ext.session_table import SessionTable


class InboundTimeSensor(faust.Sensor):
    """Records when a stream last took an event of each partition (what faust's Monitor
    records for its stall check, and nothing else)."""

    def __init__(self, inbound_times: dict[Any, float], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inbound_times = inbound_times

    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> None:
        self.inbound_times[tp] = monotonic()


class LoopwatchApp(faust.App):
    async def maybe_start_producer(self) -> Any:
        """The started producer, without faust's `@stampede` wrapper on every send.

        `Topic.send` (verdicts, warnings) and the table's changelog writes call this once
        per record; the stampede wrapper yields to the event loop three times per call
        (`asyncio.sleep(0)`), i.e. ~7 extra loop iterations per event, each an epoll
        syscall. Before the producer has started (and under exactly_once, where the
        transaction manager produces) faust's own version runs.
        """
        if not self.in_transaction and self.producer.started:
            return self.producer
        return await super().maybe_start_producer()

    def on_init_dependencies(self) -> Any:
        """faust's services, with a sensor that keeps only the stall check's input in
        place of its Monitor.

        The Monitor keeps per-message and per-event statistics (timestamps, deques,
        per-topic counters) for faust's own web views, which this worker does not serve;
        loopwatch's metrics are its own (figures: docs/architecture.md). faust's stall
        check (the consumer's livelock detector) still reads the Monitor's
        `stream_inbound_time`: left unfed, every partition with a backlog older than
        `stream_processing_timeout` logged "Stream has not started processing" at ERROR
        while its events were being processed. `InboundTimeSensor` feeds it for streams;
        `inline_callback` does so for the events topic.
        """
        services = super().on_init_dependencies()
        self.sensors.remove(self.monitor)
        self.sensors.add(InboundTimeSensor(self.monitor.stream_inbound_time))
        return services

    def _new_conductor(self) -> Any:
        # records of the events topic go to the worker without a stream
        return InlineConductor(app=self, beacon=None)


def new_app(app_id: str, settings: Any, *, web_port: int, **extra: Any) -> LoopwatchApp:
    """A faust app as loopwatch's apps run it: guarded events, the session table class,
    raw bytes, topics created by `streams.kafka.admin`, group timeouts from `settings`
    (a `streams.settings.Settings`), all records acknowledged by every replica. `extra`:
    the app's own faust settings (they override these)."""
    options: dict[str, Any] = {
        "Event": GuardedEvent,
        "Table": SessionTable,
        # restored / to restore, for /ready and loopwatch_recovery_* (recovery_progress)
        "TableManager": ProgressTableManager,
        "broker": [f"kafka://{server}" for server in settings.bootstrap_servers.split(",")],
        **settings.faust_security(),
        "store": settings.store_url,
        "datadir": settings.data_dir,
        "topic_partitions": settings.partitions,
        # Topics are created by `streams.kafka.admin`; the broker has auto-create off.
        "topic_allow_declare": False,
        "topic_disable_leader": True,
        # Standby copies of each partition's table on other workers (off by default: each
        # standby reads the changelog of the partitions it stands by for).
        "table_standby_replicas": settings.standby_replicas,
        "consumer_auto_offset_reset": "earliest",
        # Fail-over in seconds (docs/operations.md): a dead member is noticed after the
        # session timeout (faust's default is 60 s).
        "broker_session_timeout": settings.session_timeout_ms / 1000,
        "broker_heartbeat_interval": settings.heartbeat_interval_ms / 1000,
        "broker_rebalance_timeout": settings.rebalance_timeout_ms / 1000,
        "producer_acks": -1,
        # 5 ms linger for what faust itself produces (the batched outputs linger on
        # their own).
        "producer_linger": 0.005,
        # 256 KiB batches (aiokafka's default is 16 KiB): aiokafka keeps one produce
        # request in flight and one batch per partition in it, so a partition's records
        # beyond one batch wait a round trip each; session records are ~1-5 KB.
        "producer_max_batch_size": 256 * 1024,
        "web_enabled": True,
        "web_bind": settings.web_host,
        "web_port": web_port,
        "autodiscover": False,
        # Raw bytes everywhere (the table's changelog too): `models` owns the encoding.
        "key_serializer": "raw",
        "value_serializer": "raw",
    }
    return LoopwatchApp(app_id, **{**options, **extra})


class GuardedEvent(faust.Event):
    def ack(self) -> bool:
        """Ack only what the stream processed.

        faust's stream drops a message fetched before a rebalance (stale consumer
        generation, or flow stopped for recovery) without processing it, then acks it
        anyway (`Stream._c_aiter`). That ack lets the next commit pass over an event that
        never got a verdict: a restarted worker lost one about one run in three here.
        The stream marks every message it processes as `tracked` first, so an untracked
        one was dropped: leave it unacked; after the rebalance the consumer seeks back to
        the committed offset and reads it again.
        """
        if not self.message.tracked:
            return False
        acked: bool = super().ack()
        return acked


def guard_commits(
    app: Any,
    before_commit: Callable[[], Awaitable[None]],
    *,
    fetch_wait_ms: int = 0,
    changelog_batches: bool = False,
) -> None:
    """Give `app` the consumer of `offset_guard` (never commits past an unprocessed
    event), which awaits `before_commit()` (the outputs' flush) before each commit, whose
    fetches wait up to `fetch_wait_ms` while events keep coming (`fetch_wait`) and which,
    with `changelog_batches`, hands changelog records to the table recovery per fetched
    batch (`changelog_hand_off`). Call before the worker starts (faust builds its consumer
    from this transport)."""
    app.transport = GuardedTransport(
        app.conf.broker_consumer,
        app,
        before_commit=before_commit,
        fetch_wait_ms=fetch_wait_ms,
        changelog_batches=changelog_batches,
    )


def app_crasher(app: Any) -> Callable[[BaseException], None]:
    """A function that stops `app` (the worker) with an error, callable from any callback
    (it keeps the crash task referenced until it is done)."""
    crashes: set[asyncio.Future[Any]] = set()

    def crash(exc: BaseException) -> None:
        task = asyncio.ensure_future(app.crash(exc))
        crashes.add(task)
        task.add_done_callback(crashes.discard)

    return crash


def started_producer(app: Any) -> Any:
    """faust's aiokafka producer (`AIOKafkaProducer`), which exists once the app started."""
    return app.producer._ensure_producer()


def worker_ready(app: Any) -> bool:
    """Recovered its partitions at least once, and no rebalance or recovery under way
    (faust's recovery service's `completed` event; `loopwatch_worker_ready`)."""
    if not app.producer.started:
        return False
    recovered = app.tables.recovery.completed.is_set()
    return bool(recovered and not app.rebalancing and not app.in_recovery)


class ServiceWorker(faust.Worker):
    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        # faust's terminal spinner lowers the root logger to DEBUG so it can spin on
        # every record, which builds a debug record per sent message; a service needs
        # no spinner, so keep the level that was asked for.
        logger.setLevel(level)
