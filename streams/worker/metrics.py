"""Prometheus metrics of the worker, served at `/metrics` on its web port.

No session ids as label values (unbounded cardinality); `agent_id` and tool names are
bounded too, since runtimes choose them: past `MAX_AGENT_LABELS` / `MAX_TOOL_LABELS`
distinct values the rest count as "other". docs/metrics.md lists every metric.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Generic, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from loopwatch.models import LoopEpisode
from loopwatch.streams.detector import OpenEpisode

# No `<name>_created` series next to every counter and histogram: Prometheus does not use
# them, and they doubled the series a scrape returns (a process-wide switch).
disable_created_metrics()  # type: ignore[no-untyped-call]

MAX_AGENT_LABELS = 200
MAX_TOOL_LABELS = 100
_PEAK_BUCKETS = (2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100)
# Event time from a loop's first warning to the step that broke it.
_BREAK_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600)
_WARNINGS_BUCKETS = (1, 2, 3, 4, 5, 10, 20, 50)
# prometheus_client's CONTENT_TYPE_LATEST without its charset, which aiohttp (faust's
# web server) refuses inside content_type; the exposition is ASCII anyway.
CONTENT_TYPE = "text/plain; version=0.0.4"

# Produce-to-verdict latency: the detector answers in well under a millisecond; the
# buckets cover producer batching up to a consumer stall.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


M = TypeVar("M", bound=MetricWrapperBase)


class _Children(Generic[M]):
    """A labelled metric's children by label values. `labels()` checks the values and
    takes the metric's lock on every call; the children of a metric whose label sets
    nothing removes never change, so each is looked up once (the values are bounded:
    rules, outcomes and the capped agent and tool labels)."""

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: M) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


class Metrics:
    """The worker's metrics, in a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        # The three updated on every event are plain numbers, exposed by a collector of
        # their own: prometheus_client takes a lock per update (costly per event).
        self._per_event = _PerEventMetrics()
        r.register(self._per_event)
        self.warnings = Counter(
            "loopwatch_warnings",
            "Warnings published, by rule and agent.",
            ["rule", "agent_id"],
            registry=r,
        )
        self.duplicates = Counter(
            "loopwatch_duplicates_skipped",
            "Events skipped because their seq was not above the session's last.",
            registry=r,
        )
        self.resent = Counter(
            "loopwatch_verdicts_resent",
            "Verdicts sent again for a replayed event whose first send was unconfirmed.",
            registry=r,
        )
        self.reply_ignored = Counter(
            "loopwatch_reply_partition_ignored",
            "Events whose reply-partition header was ignored (the verdict went by key), by "
            "reason: malformed, out_of_range, unknown_partitions.",
            ["reason"],
            registry=r,
        )
        self.dead_letters = Counter(
            "loopwatch_dead_letters",
            "Records sent to the DLQ, by error class.",
            ["error"],
            registry=r,
        )
        self.expired = Counter(
            "loopwatch_sessions_expired",
            "Session states deleted, by reason (idle TTL or ended).",
            ["reason"],
            registry=r,
        )
        self.state_resets = Counter(
            "loopwatch_session_state_resets",
            "Events whose session's state was reset as idle just before them (the session's "
            "own event time jumped more than the TTL); their verdicts say state_reset.",
            registry=r,
        )
        self.active_sessions = Gauge(
            "loopwatch_active_sessions",
            "Sessions with state on this worker's partitions.",
            registry=r,
        )
        self._agents: set[str] = set()
        self._tools: set[str] = set()
        self._loop_metrics(r)
        self._warnings = _Children(self.warnings)
        self._expired = _Children(self.expired)
        self.partition_lag = Gauge(
            "loopwatch_partition_lag",
            "Events in each assigned partition of the events topic not yet processed "
            "(high watermark minus the next offset to process).",
            ["partition"],
            registry=r,
        )
        self.worker_ready = Gauge(
            "loopwatch_worker_ready",
            "1 when the worker has recovered its partitions and no rebalance or recovery "
            "is under way, else 0.",
            registry=r,
        )
        self.stalled_partitions = Gauge(
            "loopwatch_stalled_partitions",
            "Assigned partitions with events waiting and no progress for a while "
            "(see loopwatch.streams.worker.lag.STALL_SECONDS).",
            registry=r,
        )

    def _loop_metrics(self, r: CollectorRegistry) -> None:
        self.sessions_started = Counter(
            "loopwatch_sessions_started",
            "Sessions whose first event this worker processed (no stored state), by agent.",
            ["agent_id"],
            registry=r,
        )
        self.looping_sessions = Counter(
            "loopwatch_looping_sessions",
            "Sessions that started their first loop episode, by agent.",
            ["agent_id"],
            registry=r,
        )
        self.loops_started = Counter(
            "loopwatch_loops_started",
            "Loop episodes started (a rule's first warning for a subject), by rule and agent.",
            ["rule", "agent_id"],
            registry=r,
        )
        self.loops_ended = Counter(
            "loopwatch_loops_ended",
            "Loop episodes ended, by rule and outcome (broken, session_ended, expired).",
            ["rule", "outcome"],
            registry=r,
        )
        self.loops_by_tool = Counter(
            "loopwatch_loops_by_tool",
            "Loop episodes started, by each tool named in their warning.",
            ["tool"],
            registry=r,
        )
        self.loop_peak = Histogram(
            "loopwatch_loop_peak_repeats",
            "Highest repeat count a loop episode's warnings carried, per ended episode.",
            ["rule"],
            buckets=_PEAK_BUCKETS,
            registry=r,
        )
        self.loop_warnings = Histogram(
            "loopwatch_loop_warnings",
            "Warnings a loop episode issued, per ended episode.",
            ["rule", "outcome"],
            buckets=_WARNINGS_BUCKETS,
            registry=r,
        )
        self.loop_warned_calls = Histogram(
            "loopwatch_loop_warned_calls",
            "Model calls that saw a loop episode's warning, per ended episode (1 for a "
            "broken one: changed course at the first model call that saw it).",
            ["rule", "outcome"],
            buckets=_WARNINGS_BUCKETS,
            registry=r,
        )
        self.time_to_break = Histogram(
            "loopwatch_loop_time_to_break_seconds",
            "Event time from a broken loop episode's first warning to the step that broke it.",
            ["rule"],
            buckets=_BREAK_BUCKETS,
            registry=r,
        )
        self._sessions_started = _Children(self.sessions_started)
        self._looping_sessions = _Children(self.looping_sessions)
        self._loops_started = _Children(self.loops_started)
        self._loops_ended = _Children(self.loops_ended)
        self._loops_by_tool = _Children(self.loops_by_tool)
        self._loop_peak = _Children(self.loop_peak)
        self._loop_warnings = _Children(self.loop_warnings)
        self._loop_warned_calls = _Children(self.loop_warned_calls)
        self._time_to_break = _Children(self.time_to_break)

    def count_warning(self, rule: str, agent_id: str | None) -> None:
        """`loopwatch_warnings_total{rule, agent_id}` += 1."""
        self._warnings(rule, self.agent_label(agent_id)).inc()

    def count_expired(self, reason: str) -> None:
        """`loopwatch_sessions_expired_total{reason}` += 1."""
        self._expired(reason).inc()

    def count_session(self, agent_id: str | None) -> None:
        self._sessions_started(self.agent_label(agent_id)).inc()

    def loop_started(self, episode: OpenEpisode, *, first_in_session: bool) -> None:
        agent = self.agent_label(episode.agent_id)
        self._loops_started(episode.rule, agent).inc()
        if first_in_session:
            self._looping_sessions(agent).inc()
        for tool in episode.tool_names:
            self._loops_by_tool(self.tool_label(tool)).inc()

    def loop_ended(self, episode: LoopEpisode) -> None:
        self._loops_ended(episode.rule, episode.outcome).inc()
        self._loop_peak(episode.rule).observe(episode.peak_count)
        self._loop_warnings(episode.rule, episode.outcome).observe(episode.warnings)
        if episode.warned_calls is not None:
            self._loop_warned_calls(episode.rule, episode.outcome).observe(episode.warned_calls)
        if episode.outcome == "broken":
            self._time_to_break(episode.rule).observe(episode.duration_seconds)

    def count_event(self, event_type: str) -> None:
        """`loopwatch_events_total{type}` += 1."""
        events = self._per_event.events
        events[event_type] = events.get(event_type, 0) + 1

    def count_verdict(self) -> None:
        """`loopwatch_verdicts_total` += 1."""
        self._per_event.verdicts += 1

    def observe_latency(self, seconds: float) -> None:
        """One `loopwatch_event_to_verdict_seconds` observation."""
        per_event = self._per_event
        per_event.latency_counts[bisect.bisect_left(_LATENCY_BUCKETS, seconds)] += 1
        per_event.latency_sum += seconds

    def agent_label(self, agent_id: str | None) -> str:
        if agent_id is None:
            return ""
        if agent_id in self._agents:
            return agent_id
        if len(self._agents) < MAX_AGENT_LABELS:
            self._agents.add(agent_id)
            return agent_id
        return "other"

    def tool_label(self, tool: str) -> str:
        if tool in self._tools:
            return tool
        if len(self._tools) < MAX_TOOL_LABELS:
            self._tools.add(tool)
            return tool
        return "other"

    def exposition(self) -> bytes:
        """The text format that Prometheus scrapes."""
        return generate_latest(self.registry)


class _PerEventMetrics(Collector):
    """Counters and the latency histogram as plain numbers, turned into metric families
    when scraped (the worker's event loop is single-threaded: no lock needed)."""

    def __init__(self) -> None:
        self.events: dict[str, int] = {}
        self.verdicts = 0
        # bucket i counts observations <= _LATENCY_BUCKETS[i]; the last one, the rest
        self.latency_counts = [0] * (len(_LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0

    def collect(self) -> Iterator[Metric]:
        events = CounterMetricFamily(
            "loopwatch_events", "Events processed, by type.", labels=["type"]
        )
        for event_type, count in sorted(self.events.items()):
            events.add_metric([event_type], count)
        yield events
        yield CounterMetricFamily("loopwatch_verdicts", "Verdicts published.", value=self.verdicts)
        cumulative = 0
        buckets = []
        bounds = [*(repr(bound) for bound in _LATENCY_BUCKETS), "+Inf"]
        for bound, count in zip(bounds, self.latency_counts, strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        latency = HistogramMetricFamily(
            "loopwatch_event_to_verdict_seconds",
            "From the event record's timestamp to the verdict's acknowledgement.",
        )
        latency.add_metric([], buckets, sum_value=self.latency_sum)
        yield latency
