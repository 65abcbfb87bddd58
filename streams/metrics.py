"""Prometheus metrics of the worker, served at `/metrics` on its web port.

No session ids as label values (unbounded cardinality); `agent_id` is bounded too, since
runtimes choose it: past `MAX_AGENT_LABELS` distinct values the rest count as "other".
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

MAX_AGENT_LABELS = 200
# prometheus_client's CONTENT_TYPE_LATEST without its charset, which aiohttp (faust's
# web server) refuses inside content_type; the exposition is ASCII anyway.
CONTENT_TYPE = "text/plain; version=0.0.4"

# Produce-to-verdict latency: the detector answers in well under a millisecond; the
# buckets cover producer batching up to a consumer stall.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class Metrics:
    """The worker's metrics, in a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.events = Counter(
            "loopwatch_events", "Events processed, by type.", ["type"], registry=r
        )
        self.verdicts = Counter("loopwatch_verdicts", "Verdicts published.", registry=r)
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
        self.active_sessions = Gauge(
            "loopwatch_active_sessions",
            "Sessions with state on this worker's partitions.",
            registry=r,
        )
        self.latency = Histogram(
            "loopwatch_event_to_verdict_seconds",
            "From the event record's timestamp to the verdict's acknowledgement.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self._agents: set[str] = set()
        self._events_by_type: dict[str, Any] = {}

    def count_event(self, event_type: str) -> None:
        """`events{type}` += 1, with the labelled child cached (`labels()` costs a lock
        and a tuple build per call, on every event)."""
        child = self._events_by_type.get(event_type)
        if child is None:
            child = self._events_by_type[event_type] = self.events.labels(event_type)
        child.inc()

    def agent_label(self, agent_id: str | None) -> str:
        if agent_id is None:
            return ""
        if agent_id in self._agents:
            return agent_id
        if len(self._agents) < MAX_AGENT_LABELS:
            self._agents.add(agent_id)
            return agent_id
        return "other"

    def exposition(self) -> bytes:
        """The text format that Prometheus scrapes."""
        return generate_latest(self.registry)
