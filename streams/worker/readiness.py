"""`/healthz` and `/ready` on the worker's web port, for Kubernetes probes.

`/healthz`: the process serves HTTP (liveness). `/ready`: this worker processes its share
of the events right now: it has partitions of the events topic assigned, no rebalance or
table recovery is under way, the processing of the events has not crashed (the worker
stops then) without processing a record since, and the broker is reachable with the
producer not failed. Both answer JSON; `/ready` answers 503 with the reasons when not
ready. docs/operations.md says how to probe them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from loopwatch.streams.kafka.faust_ext.recovery_progress import (
    records_read,
    recovery_progress,
    standby_records_behind,
)
from loopwatch.streams.worker.broker_outage import BrokerOutage


@dataclass
class ProcessingHealth:
    """Crashes of the events' processing (`streams.worker.app`; the worker stops after one), and
    whether a record was processed since."""

    crashes: int = 0
    """`loopwatch_processing_crashes_total`."""
    last_error: str | None = None
    """The exception type of the last crash."""
    processed: int = 0
    """Records processed (any outcome)."""
    processed_at_crash: int = -1

    def crashed(self, exc: BaseException) -> None:
        self.crashes += 1
        self.last_error = type(exc).__name__
        self.processed_at_crash = self.processed

    @property
    def stalled(self) -> bool:
        """It crashed and has processed nothing since (it may be crashing on a record)."""
        return self.processed == self.processed_at_crash


@dataclass
class Readiness:
    """Reads the worker's state when a probe asks; holds none of its own but the
    processing's health."""

    app: Any
    """The faust app (its consumer, rebalancing and recovery flags)."""
    events_topic: str
    outage: BrokerOutage
    producer_failed: Callable[[], bool] = lambda: False
    processing: ProcessingHealth = field(default_factory=ProcessingHealth)
    compacting: Callable[[], Collection[int]] = frozenset
    """Restored partitions whose store compacts before the worker processes them."""
    clock: Callable[[], float] = time.monotonic

    def partitions(self) -> list[int]:
        """Partitions of the events topic assigned to this worker."""
        try:
            assignment = self.app.consumer.assignment()
        except Exception:  # no consumer yet (starting) or it is stopping
            return []
        return sorted(tp.partition for tp in assignment if tp.topic == self.events_topic)

    def check(self) -> tuple[bool, dict[str, Any]]:
        """(ready, the JSON document: `ready`, `partitions`, `reasons` when not ready)."""
        partitions = self.partitions()
        reasons = []
        if not partitions:
            reasons.append("no partitions of the events topic assigned")
        if self.app.rebalancing:
            reasons.append("rebalancing")
        progress = recovery_progress(self.app)
        if progress is not None:
            reasons.append(
                "recovering the sessions table from its changelog "
                f"({progress.restored} of {progress.to_restore} records, "
                f"{progress.fraction:.0%})"
            )
        compacting = sorted(self.compacting())
        if compacting:
            reasons.append(f"compacting the restored sessions table (partitions {compacting})")
        if self.processing.stalled:
            reasons.append(
                f"event processing crashed ({self.processing.last_error}) "
                "and has processed no record since"
            )
        if self.outage.down_since is not None:
            down = self.clock() - self.outage.down_since
            reasons.append(f"Kafka broker unavailable for {down:.0f} s")
        if self.producer_failed():
            reasons.append("the producer failed to deliver records")
        document: dict[str, Any] = {
            "ready": not reasons,
            "partitions": partitions,
            "processing_crashes": self.processing.crashes,
            # the name before 0.2 (faust's "agent"), kept for a release
            "agent_crashes": self.processing.crashes,
        }
        if progress is not None:
            document["recovery"] = {
                "restored": progress.restored,
                "to_restore": progress.to_restore,
                "remaining": progress.remaining,
                "read": progress.read,
            }
        if reasons:
            document["reasons"] = reasons
        return not reasons, document


class _ProcessingCrashes(Collector):
    def __init__(self, health: ProcessingHealth) -> None:
        self.health = health

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "loopwatch_processing_crashes",
            "Crashes of the events' processing (/ready says when it is stalled).",
            value=self.health.crashes,
        )
        # the name before 0.2 (faust calls its stream processors "agents"); kept for one
        # release so that dashboards and alerts can move (docs/metrics.md)
        yield CounterMetricFamily(
            "loopwatch_agent_crashes",
            "Deprecated alias of loopwatch_processing_crashes_total.",
            value=self.health.crashes,
        )


class _Recovery(Collector):
    def __init__(self, app: Any) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        progress = recovery_progress(self.app)
        yield GaugeMetricFamily(
            "loopwatch_recovery_records_remaining",
            "Changelog records this worker still has to restore (0: no recovery).",
            value=0 if progress is None else progress.remaining,
        )
        yield GaugeMetricFamily(
            "loopwatch_recovery_records_to_restore",
            "Changelog records the recovery under way started with (0: no recovery).",
            value=0 if progress is None else progress.to_restore,
        )
        yield CounterMetricFamily(
            "loopwatch_recovery_records_read",
            "Changelog records this worker's table recoveries have read since it started "
            "(its rate is the restore's; offsets overstate it after compaction).",
            value=records_read(self.app),
        )
        yield GaugeMetricFamily(
            "loopwatch_standby_records_behind",
            "Changelog records this worker's standby partitions (LOOPWATCH_STANDBY_REPLICAS) "
            "have yet to read: what a take-over by this worker reads first (0: none).",
            value=standby_records_behind(self.app),
        )


def serve_health(app: Any, readiness: Readiness, registry: CollectorRegistry) -> None:
    """`/healthz` and `/ready` on the app's web server; `loopwatch_processing_crashes_total`,
    the recovery's progress (`loopwatch_recovery_records_*`) and the standbys' lag
    (`loopwatch_standby_records_behind`). `app.loopwatch_readiness` is `readiness`."""
    app.loopwatch_readiness = readiness
    registry.register(_ProcessingCrashes(readiness.processing))
    registry.register(_Recovery(app))

    async def healthz(web: Any, request: Any) -> Any:
        return web.json({"status": "ok"})

    async def ready(web: Any, request: Any) -> Any:
        ok, document = readiness.check()
        return web.json(document, status=200 if ok else 503)

    app.page("/healthz")(healthz)
    app.page("/ready")(ready)
