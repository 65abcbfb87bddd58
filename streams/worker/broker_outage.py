"""A broker outage in the worker's log: one line when it starts, a summary every 30 s while
it lasts, one line when it ends, instead of aiokafka's line per retry (thousands of lines for an
outage of seconds; docs/performance.md, "Hot-path choices").

aiokafka logs every failed connection, metadata update, fetch and coordinator lookup at
ERROR, and keeps retrying on its own (the worker recovers by itself). `OutageLogFilter`
sits on aiokafka's loggers: a connection failure starts or extends the outage and is
dropped; while an outage lasts, every aiokafka warning or error is dropped and counted.
The outage ends once aiokafka has found the group coordinator again ("Discovered
coordinator") and `QUIET_SECONDS` passed without a new failure, or after
`FALLBACK_QUIET_SECONDS` without any failure. `BrokerOutage.tick` (a 1 s timer) writes
the summaries and the end line. "Coordinator not available" while a group forms (every
normal start on a fresh group) is a retried state, not an error: it is dropped too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

SUMMARY_EVERY_SECONDS = 30.0
QUIET_SECONDS = 3.0
FALLBACK_QUIET_SECONDS = 15.0

# Substrings of aiokafka's messages (and of the errors they name) that mean "cannot reach
# the broker"; checked against the formatted message.
_CONNECTION_FAILURES = (
    "Unable connect to",
    "Unable to update metadata",
    "Unable to request metadata",
    "KafkaConnectionError",
    "NodeNotReadyError",
    "Connect call failed",
    "RequestTimedOutError",
)
_COORDINATOR_FORMING = ("CoordinatorNotAvailableError", "NotCoordinatorError")
_RECOVERED = "Discovered coordinator"


class BrokerOutage:
    """The state of one worker's broker connection, as its log and metrics tell it."""

    def __init__(
        self,
        log: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
        subject: str = "the worker",
    ) -> None:
        self.log = log or logging.getLogger("loopwatch.broker")
        self.subject = subject
        """Who keeps retrying, as the log line says it."""
        self.clock = clock
        self.down_since: float | None = None
        """When the current outage started (None: the broker is reachable)."""
        self._last_failure = 0.0
        self._recovered_at: float | None = None
        self._last_summary = 0.0
        self._suppressed = 0
        self._suppressed_total = 0
        self._past_seconds = 0.0
        self.outages = 0
        """Outages started so far."""

    @property
    def unavailable(self) -> bool:
        return self.down_since is not None

    def unavailable_seconds_total(self) -> float:
        """Seconds of all outages so far, the current one included."""
        current = 0.0 if self.down_since is None else self.clock() - self.down_since
        return self._past_seconds + current

    def failure(self, reason: str) -> None:
        """A failed attempt to reach the broker."""
        now = self.clock()
        self._last_failure = now
        self._recovered_at = None
        if self.down_since is None:
            self.down_since = self._last_summary = now
            self.outages += 1
            self._suppressed = self._suppressed_total = 0
            self.log.warning(
                "Kafka broker unavailable (%s); %s keeps retrying, a summary follows every %.0f s",
                reason,
                self.subject,
                SUMMARY_EVERY_SECONDS,
            )
        else:
            self.suppressed()

    def suppressed(self) -> None:
        """A client error line dropped during the outage."""
        self._suppressed += 1
        self._suppressed_total += 1

    def recovered(self) -> None:
        """The client found the group coordinator again."""
        if self.down_since is not None:
            self._recovered_at = self.clock()

    def tick(self) -> None:
        """Write a summary or the end of the outage when due (called every second)."""
        if self.down_since is None:
            return
        now = self.clock()
        quiet = now - self._last_failure
        if (self._recovered_at is not None and quiet >= QUIET_SECONDS) or (
            quiet >= FALLBACK_QUIET_SECONDS
        ):
            end = self._recovered_at if self._recovered_at is not None else self._last_failure
            duration = max(end - self.down_since, 0.0)
            self._past_seconds += duration
            self.down_since = None
            self._recovered_at = None
            self.log.warning(
                "Kafka broker available again after %.1f s (%d client error lines not shown)",
                duration,
                self._suppressed_total,
            )
        elif now - self._last_summary >= SUMMARY_EVERY_SECONDS:
            self._last_summary = now
            self.log.warning(
                "Kafka broker still unavailable after %.0f s (%d client error lines in the "
                "last %.0f s not shown)",
                now - self.down_since,
                self._suppressed,
                SUMMARY_EVERY_SECONDS,
            )
            self._suppressed = 0


class OutageLogFilter(logging.Filter):
    """On aiokafka's loggers: turns connection errors into `BrokerOutage` calls."""

    def __init__(self, outage: BrokerOutage) -> None:
        super().__init__()
        self.outage = outage

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            if record.getMessage().startswith(_RECOVERED):
                self.outage.recovered()
            return True
        message = record.getMessage()
        if any(marker in message for marker in _CONNECTION_FAILURES):
            self.outage.failure(_short(message))
            return False
        if self.outage.unavailable:
            self.outage.suppressed()
            return False
        return not any(marker in message for marker in _COORDINATOR_FORMING)


def _short(message: str) -> str:
    return message.splitlines()[0][:160] if message else "connection failed"


def install(outage: BrokerOutage) -> OutageLogFilter:
    """Put the filter on every aiokafka logger (a logger's filter sees only its own
    records, not those of its children)."""
    import aiokafka  # noqa: PLC0415  (its modules create their loggers on import)
    import aiokafka.consumer.group_coordinator  # noqa: F401, PLC0415

    log_filter = OutageLogFilter(outage)
    names = [name for name in logging.root.manager.loggerDict if name.split(".")[0] == "aiokafka"]
    for name in ["aiokafka", *names]:
        logging.getLogger(name).addFilter(log_filter)
    return log_filter


class OutageCollector(Collector):
    """`loopwatch_broker_unavailable_seconds_total`, read when Prometheus scrapes."""

    def __init__(self, outage: BrokerOutage) -> None:
        self.outage = outage

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "loopwatch_broker_unavailable_seconds",
            "Seconds this worker could not reach the Kafka broker (logged outages).",
            value=self.outage.unavailable_seconds_total(),
        )
        yield CounterMetricFamily(
            "loopwatch_broker_outages",
            "Broker outages this worker logged (started).",
            value=self.outage.outages,
        )


def watch_broker(app: Any, registry: CollectorRegistry) -> BrokerOutage:
    """The app's outage tracker: its metrics in `registry`, its summaries on a 1 s timer."""
    outage = BrokerOutage()
    registry.register(OutageCollector(outage))

    async def log_outage() -> None:
        outage.tick()

    app.timer(interval=1.0, name="loopwatch.broker_outage")(log_outage)
    return outage
