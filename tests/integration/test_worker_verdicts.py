"""One worker on the real broker: verdicts equal `loopwatch scan`'s, dead letters for each
bad kind with the good records around them processed, duplicates get no second verdict,
warnings and metrics."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from loopwatch.models import AgentEvent, DetectionConfig, decode_event
from loopwatch.streams.kafka.dead_letters import (
    HEADER_ERROR,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
)
from loopwatch.streams.scan.scanner import Scanner
from tests.integration.worker_harness import (
    WorkerEnv,
    WorkerProcess,
    consume,
    event_records,
    loop_dense_stream,
    metric_value,
    metrics_page,
    produce,
    scan_verdicts,
    verdict_key,
    without_clock,
)
from tests.support.monitoring import missing_from
from tests.support.shared_data import trajectory_files

pytestmark = pytest.mark.kafka

BAD_RECORDS: list[tuple[str, bytes | None, bytes | None]] = [
    ("not_utf8", b"bad-1", b"\xff\xfe{}"),
    ("not_json", b"bad-2", b"{this is not json"),
    ("schema", b"bad-3", b'{"type": "user_message", "session_id": "bad-3", "seq": -1}'),
    (
        "key_mismatch",
        b"bad-4",
        b'{"type":"user_message","session_id":"other","seq":0,"ts":"2026-12-02T09:00:00Z"}',
    ),
    ("too_large", b"bad-5", b'{"pad": "' + b"x" * 70_000 + b'"}'),
    ("empty", b"bad-6", None),
]


@dataclass
class Run:
    events: list[AgentEvent]
    duplicates: list[AgentEvent]
    verdicts: list[Any]
    warnings: list[Any]
    dead_letters: list[Any]
    episodes: list[Any]
    metrics: str
    worker_log: str


def _input_events() -> list[AgentEvent]:
    events: list[AgentEvent] = []
    for path in trajectory_files():
        events += [decode_event(line) for line in path.read_text().splitlines() if line.strip()]
    return events + loop_dense_stream(sessions=200, steps=12)


@pytest.fixture(scope="module")
def run(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    env = WorkerEnv.unique(kafka_bootstrap, extra=(("LOOPWATCH_MAX_EVENT_BYTES", "65536"),))
    events = _input_events()
    duplicates = events[100:400:7]  # redelivered later, as a producer retry would
    records = event_records(events[:2000])
    for _, key, value in BAD_RECORDS:  # bad records between good ones
        records.append((key, value))
    records += event_records(events[2000:]) + event_records(duplicates)

    expected = scan_verdicts(events)
    expected_warnings = sum(1 for v in expected.values() if v["warning"])
    asyncio.run(env.create_topics())
    worker = WorkerProcess(env, tmp_path_factory.mktemp("worker"))
    try:
        asyncio.run(produce(kafka_bootstrap, env.events, records))
        verdicts = asyncio.run(consume(kafka_bootstrap, env.verdicts, until=len(expected)))
        dead = asyncio.run(consume(kafka_bootstrap, env.dlq, until=len(BAD_RECORDS)))
        warnings = asyncio.run(consume(kafka_bootstrap, env.warnings, until=expected_warnings))
        episodes = asyncio.run(
            consume(kafka_bootstrap, env.episodes, until=len(scan_episodes(events)))
        )
        # The redelivered events come last and get no verdict: wait until all were seen.
        duplicates_seen = len(duplicates) + len(events) - len(expected)
        # every series the dashboard reads too (partition lag is measured on a timer)
        metrics = metrics_page(
            worker.web_port,
            lambda page: (
                not missing_from(page)
                and metric_value(page, "loopwatch_duplicates_skipped_total") >= duplicates_seen
            ),
        )
    finally:
        worker.stop()
    yield Run(events, duplicates, verdicts, warnings, dead, episodes, metrics, worker.log())


def scan_episodes(events: list[AgentEvent]) -> list[bytes]:
    """The loop episode records `loopwatch scan --episodes` prints, except the ones still
    open at the end of the input (the worker keeps those open until they expire)."""
    scanner = Scanner(DetectionConfig())
    closed: list[bytes] = []
    for event in events:
        scanner.judge(event)
        closed.extend(episode.to_json() for episode in scanner.closed_episodes)
    return closed


def test_verdicts_equal_scan(run: Run) -> None:
    expected = scan_verdicts(run.events)
    got = {verdict_key(r): without_clock(r.value) for r in run.verdicts}
    assert len(got) == len(expected), run.worker_log[-3000:]
    assert got == expected
    assert any(v["warning"] for v in expected.values()), "the input must contain loops"


def test_each_event_gets_exactly_one_verdict_despite_duplicates(run: Run) -> None:
    counts = Counter(verdict_key(r) for r in run.verdicts)
    assert run.duplicates
    assert max(counts.values()) == 1
    assert all(r.key == verdict_key(r)[0].encode() for r in run.verdicts)


def test_warnings_topic_holds_exactly_the_warned_verdicts(run: Run) -> None:
    warned = {k: v for k, v in scan_verdicts(run.events).items() if v["warning"]}
    got = {verdict_key(r): without_clock(r.value) for r in run.warnings}
    assert got == warned


def test_dead_letters_for_each_bad_kind_with_original_bytes(run: Run) -> None:
    by_kind = {dict(r.headers)[HEADER_ERROR].decode(): r for r in run.dead_letters}
    assert sorted(by_kind) == sorted(kind for kind, _, _ in BAD_RECORDS)
    for kind, key, value in BAD_RECORDS:
        letter = by_kind[kind]
        headers = dict(letter.headers)
        assert (letter.key, letter.value) == (key, value)
        assert headers[HEADER_TOPIC].decode().endswith("-events")
        assert int(headers[HEADER_PARTITION]) >= 0
        assert int(headers[HEADER_OFFSET]) >= 0


def test_metrics_page_counts_what_happened(run: Run) -> None:
    lines = dict(
        line.rsplit(" ", 1) for line in run.metrics.splitlines() if line and line[0] != "#"
    )
    expected = scan_verdicts(run.events)
    assert float(lines["loopwatch_verdicts_total"]) == len(expected)
    skipped_in_input = len(run.events) - len(expected)
    duplicates = float(lines["loopwatch_duplicates_skipped_total"])
    assert duplicates == len(run.duplicates) + skipped_in_input
    for kind, _, _ in BAD_RECORDS:
        assert float(lines[f'loopwatch_dead_letters_total{{error="{kind}"}}']) == 1
    warned = sum(float(v) for k, v in lines.items() if k.startswith("loopwatch_warnings_total"))
    assert warned == len(run.warnings)
    assert float(lines["loopwatch_event_to_verdict_seconds_count"]) >= len(expected)
    assert "syn-0001" not in run.metrics


def test_loop_episodes_equal_scan(run: Run) -> None:
    expected = scan_episodes(run.events)
    assert len(expected) > 100, "the input must close many loop episodes"
    assert Counter(r.value for r in run.episodes) == Counter(expected)
    assert all(r.key == json.loads(r.value)["session_id"].encode() for r in run.episodes)


def test_every_dashboard_panel_metric_is_on_the_workers_metrics_page(run: Run) -> None:
    assert missing_from(run.metrics) == {}
    assert "_created" not in run.metrics
    assert "loopwatch_worker_ready 1.0" in run.metrics
