"""The live fleet page in a real headless Chromium, after a demo-sized run through a real
worker and broker: it shows the loops that the run's published warnings hold."""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from selenium.webdriver.support.ui import WebDriverWait

from loopwatch.models import RULES, decode_event
from loopwatch.streams.demo.fleet import Fleet
from loopwatch.streams.demo.worker_process import WorkerProcess
from loopwatch.streams.fleetview.board import TIME_TO_BREAK_BUCKETS
from loopwatch.streams.fleetview.feed import FeedTopics
from loopwatch.streams.fleetview.server import start_dashboard
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.settings import Settings
from tests.support.browser import chart_values, full_page_screenshot, headless_chromium

pytestmark = pytest.mark.kafka

PAGE_DEADLINE_SECONDS = 60.0


async def read_all(settings: Settings, topic: str) -> list[bytes]:
    """Every record of `topic` up to its current end, all partitions, in partition order."""
    consumer = AIOKafkaConsumer(**settings.aiokafka_kwargs(), enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        values: list[bytes] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                values.extend(r.value for r in records if r.value is not None)
        return values
    finally:
        await consumer.stop()


async def test_the_page_shows_the_loops_of_a_demo_run(
    worker: WorkerProcess, e2e_settings: Settings, tmp_path: Path
) -> None:
    settings = e2e_settings
    topics = FeedTopics(settings.warnings_topic, settings.episodes_topic)
    dashboard = await start_dashboard(
        settings, topics, host="127.0.0.1", port=0, since_seconds=3600
    )
    try:
        summary = await Fleet(
            settings, trajectories=None, trajectory_limit=None, out=io.StringIO()
        ).run()
        assert summary.loops_broken == summary.loops > 0

        # what the run actually published: its events, and the worker's warnings for them
        scanner = Scanner(settings.detection)
        for value in await read_all(settings, settings.events_topic):
            scanner.judge(decode_event(value))
        expected_warnings = sum(scanner.stats.warnings.values())
        assert expected_warnings == sum(summary.warnings.values())
        published = [json.loads(v) for v in await read_all(settings, settings.warnings_topic)]
        assert len(published) == expected_warnings
        expected = Published.of(published)
        # every loop of the run was closed and published as an episode (the page reads them)
        episodes = [json.loads(v) for v in await read_all(settings, settings.episodes_topic)]
        assert {(e["session_id"], e["rule"]) for e in episodes} == expected.loops

        # selenium blocks: drive the browser from a thread while this loop serves the page
        shot = await asyncio.to_thread(
            check_page, dashboard.url, tmp_path, expected, Closed.of(episodes)
        )
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        await dashboard.stop()


@dataclass(frozen=True)
class Published:
    """What the warnings on the topic say: the run's loops (one per session and rule)."""

    warnings: int
    loops: set[tuple[str, str]]
    by_rule: Counter[str]
    agents: Counter[str]

    @classmethod
    def of(cls, warnings: list[dict[str, Any]]) -> Published:
        loops = {(w["session_id"], w["warning"]["rule"]) for w in warnings}
        agent_of = {w["session_id"]: w["agent_id"] for w in warnings}
        return cls(
            len(warnings),
            loops,
            Counter(rule for _, rule in loops),
            Counter(agent_of[sid] for sid, _ in loops),
        )


@dataclass(frozen=True)
class Closed:
    """What the episodes on the topic say: loops broken after the first warning, time to
    break."""

    closed: int
    broken_first: int
    time_to_break: dict[str, int]

    @classmethod
    def of(cls, episodes: list[dict[str, Any]]) -> Closed:
        bars = dict.fromkeys((label for label, _ in TIME_TO_BREAK_BUCKETS), 0)
        for episode in episodes:
            if episode["outcome"] == "broken":
                seconds = episode["duration_seconds"]
                label = next(lb for lb, upper in TIME_TO_BREAK_BUCKETS if seconds < upper)
                bars[label] += 1
        # contract §8.3: broken after the first warning = at most one model call saw it
        # (records without `warned_calls`: one verdict warning)
        first = sum(
            e["outcome"] == "broken"
            and (e["warnings"] == 1 if e.get("warned_calls") is None else e["warned_calls"] <= 1)
            for e in episodes
        )
        return cls(len(episodes), first, bars)


def check_page(url: str, tmp_path: Path, expected: Published, closed: Closed) -> Path:
    with headless_chromium(tmp_path / "chromium-profile") as driver:
        driver.get(url)
        WebDriverWait(driver, PAGE_DEADLINE_SECONDS).until(
            lambda d: (
                d.execute_script("return document.body.dataset.warnings") == str(expected.warnings)
            )
        )
        body: dict[str, Any] = driver.execute_script("return {...document.body.dataset}")
        assert body["loops"] == str(len(expected.loops))
        rules = {rule: expected.by_rule[rule] for rule in RULES}
        assert chart_values(driver, "chart-rules") == rules
        assert chart_values(driver, "chart-agents") == dict(expected.agents)
        per_minute = Counter[str]()
        for label, value in chart_values(driver, "chart-per-minute").items():
            per_minute[label.split(" ")[1]] += value
        assert +per_minute == +expected.by_rule
        first: dict[str, str] = driver.execute_script(
            "return {...document.getElementById('chart-first').dataset}"
        )
        assert (first["part"], first["whole"]) == (str(closed.broken_first), str(closed.closed))
        # every scripted loop changes course at the first model call that sees its warning
        assert closed.broken_first == closed.closed > 0
        assert sum(closed.time_to_break.values()) > 0  # the demo's loops are broken
        assert chart_values(driver, "chart-break") == closed.time_to_break
        shot = full_page_screenshot(driver, tmp_path / "fleet-page.png")
    return shot
