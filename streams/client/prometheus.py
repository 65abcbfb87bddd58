"""The client's counters for Prometheus, opt-in: `LoopwatchClient(..., registry=registry)`.

prometheus_client is not a dependency of the client: this module is imported only when a
registry is passed. The values are read from `client.stats` when the registry is
collected, so the agent's call path pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from loopwatch.streams.client.client import LoopwatchClient

PREFIX = "loopwatch_client_"


class ClientCollector:
    """A prometheus_client collector of one client's stats."""

    def __init__(self, client: LoopwatchClient) -> None:
        self._client = client

    def collect(self) -> Iterator[Any]:
        stats = self._client.stats
        circuit = stats.circuit
        counters = {
            "published": ("events the broker acknowledged", stats.published),
            "publish_errors": ("events of failed delivery attempts", stats.publish_errors),
            "dropped": ("events never delivered (buffer full, unencodable, closed)", stats.dropped),
            "waits": ("verdict waits", stats.waits),
            "timeouts": ("verdict waits that gave up", stats.timeouts),
            "skipped_waits": ("verdict waits skipped: the circuit was open", stats.skipped_waits),
            "bad_records": ("undecodable verdict records", stats.bad_records),
            "circuit_opens": ("times the circuit opened", circuit.opens),
            "circuit_closes": ("times the circuit closed again", circuit.closes),
        }
        for name, (documentation, value) in counters.items():
            yield CounterMetricFamily(PREFIX + name, documentation, value=value)
        warnings = CounterMetricFamily(
            PREFIX + "warnings", "warnings received, by rule", labels=["rule"]
        )
        for rule, count in sorted(stats.warnings.items()):
            warnings.add_metric([rule], count)
        yield warnings
        gauges = {
            "buffered": ("events waiting for delivery", stats.buffered),
            "connected": ("1 when connected to Kafka", int(stats.connected)),
            "circuit_open": ("1 while the circuit is open", int(circuit.state == "open")),
            "circuit_consecutive_failures": (
                "consecutive failures counted by the breaker",
                circuit.consecutive_failures,
            ),
        }
        for name, (documentation, value) in gauges.items():
            yield GaugeMetricFamily(PREFIX + name, documentation, value=value)


def register_client_metrics(client: LoopwatchClient, registry: Any) -> ClientCollector:
    """Register the client's counters in `registry`."""
    collector = ClientCollector(client)
    registry.register(collector)
    return collector
