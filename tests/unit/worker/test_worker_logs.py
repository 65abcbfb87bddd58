"""The worker's log: broker outages summarised (streams.worker.broker_outage) and the JSON format
(streams.worker.log_format), driven by hand-made log records and a hand-moved clock."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from loopwatch.streams.worker.broker_outage import (
    FALLBACK_QUIET_SECONDS,
    QUIET_SECONDS,
    SUMMARY_EVERY_SECONDS,
    BrokerOutage,
    OutageCollector,
    OutageLogFilter,
)
from loopwatch.streams.worker.log_format import JsonLogFormatter
from tests.support.clocks import ManualClock


def record(
    message: str, level: int = logging.ERROR, name: str = "aiokafka.client"
) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, (), None)


CONNECT = "Unable connect to node with id 1: [Errno 111] Connect call failed ('127.0.0.1', 9092)"


def test_an_outage_is_three_lines_with_its_duration(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(1000.0)
    outage = BrokerOutage(clock=clock)
    log_filter = OutageLogFilter(outage)
    caplog.set_level(logging.INFO, logger="loopwatch.broker")
    shown = []
    for second in range(70):  # 70 s of retries, 40 failing lines a second
        clock.now = 1000.0 + second
        for n in range(40):
            line = CONNECT if n % 2 else "Unable to update metadata from [1]"
            shown.append(log_filter.filter(record(line)))
        outage.tick()
    # other client errors while the broker is away are dropped too
    assert not log_filter.filter(record("Heartbeat session expired - marking coordinator dead"))
    assert not any(shown)
    clock.now = 1070.5
    assert log_filter.filter(record("Discovered coordinator 1 for group g", logging.INFO))
    clock.now += QUIET_SECONDS
    outage.tick()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 + 2 + 1  # start, two summaries (30 s, 60 s), end
    assert messages[0].startswith("Kafka broker unavailable (Unable to update metadata")
    assert messages[1].startswith("Kafka broker still unavailable after 30 s (")
    assert messages[-1].startswith("Kafka broker available again after 70.5 s")
    assert outage.unavailable_seconds_total() == pytest.approx(70.5)
    # after the outage, client errors show again
    assert log_filter.filter(record("Something else failed", logging.WARNING))


def test_the_dashboard_names_itself_as_the_one_that_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("test.dashboard")
    outage = BrokerOutage(clock=ManualClock(1000.0), log=log, subject="the dashboard")
    caplog.set_level(logging.INFO, logger="test.dashboard")
    assert not OutageLogFilter(outage).filter(record(CONNECT))
    [message] = [r.getMessage() for r in caplog.records]
    assert "; the dashboard keeps retrying" in message


def test_the_end_waits_for_quiet_after_the_coordinator_is_back() -> None:
    clock = ManualClock(1000.0)
    outage = BrokerOutage(clock=clock, log=logging.getLogger("test.outage"))
    log_filter = OutageLogFilter(outage)
    log_filter.filter(record(CONNECT))
    log_filter.filter(record("Discovered coordinator 1 for group g", logging.INFO))
    clock.now += 1
    log_filter.filter(record(CONNECT))  # failing again: not over
    clock.now += QUIET_SECONDS
    outage.tick()
    assert outage.unavailable
    clock.now += FALLBACK_QUIET_SECONDS  # no failure for long: over, ended at the last one
    outage.tick()
    assert not outage.unavailable
    assert outage.unavailable_seconds_total() == pytest.approx(1.0)
    assert outage.outages == 1


def test_a_forming_coordinator_on_start_is_not_an_error() -> None:
    outage = BrokerOutage(clock=ManualClock(1000.0))
    log_filter = OutageLogFilter(outage)
    forming = "Group Coordinator Request failed: [Error 15] GroupCoordinatorNotAvailableError"
    assert not log_filter.filter(record(forming))
    assert not outage.unavailable
    assert log_filter.filter(record("Some other aiokafka error"))


def test_the_metric_counts_the_current_outage_too() -> None:
    clock = ManualClock(1000.0)
    outage = BrokerOutage(clock=clock, log=logging.getLogger("test.outage"))
    registry = CollectorRegistry()
    registry.register(OutageCollector(outage))
    outage.failure("refused")
    clock.now += SUMMARY_EVERY_SECONDS / 2
    text = generate_latest(registry).decode()
    assert "loopwatch_broker_unavailable_seconds_total 15.0" in text
    assert "loopwatch_broker_outages_total 1.0" in text


def test_json_lines_carry_time_level_logger_message_and_fields() -> None:
    formatter = JsonLogFormatter()
    line = record("partition %d stalled", logging.WARNING, "loopwatch.worker")
    line.args = (3,)
    line.partition = 3
    document = json.loads(formatter.format(line))
    assert document["level"] == "WARNING"
    assert document["logger"] == "loopwatch.worker"
    assert document["message"] == "partition 3 stalled"
    assert document["partition"] == 3
    assert document["time"].endswith("+00:00")
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "multi\nline", (), sys.exc_info()
        )
    text = formatter.format(failed)
    assert "\n" not in text  # one line per record, whatever it holds
    assert "ValueError: boom" in json.loads(text)["exception"]
