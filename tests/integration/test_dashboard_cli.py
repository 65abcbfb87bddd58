"""`loopwatch dashboard` options and start-up errors, and the demo's page when it cannot
start: clear messages, never a traceback."""

from __future__ import annotations

import io
import socket

import pytest
from aiohttp import ClientSession

from loopwatch.streams.cli import main
from loopwatch.streams.demo.page import DemoPage
from loopwatch.streams.fleetview.feed import FeedError, FeedTopics
from loopwatch.streams.fleetview.server import start_dashboard
from loopwatch.streams.kafka.admin import create_topics
from loopwatch.streams.settings import Settings


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "70000"], "--port: must be a port number (1-65535), got '70000'"),
        (["--port", "http"], "--port: must be an integer >= 1, got 'http'"),
        (["--warnings-topic", "a b"], "--warnings-topic: the value must be 1-200 characters"),
        (["--episodes-topic", ".."], "--episodes-topic: the value must be 1-200 characters"),
        (["--since", "-5"], "--since: must be minutes from 0 to 527040, got '-5'"),
    ],
)
def test_bad_options_are_named(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["dashboard", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.kafka
def test_a_missing_warnings_topic_is_an_error_that_says_what_to_do(
    kafka_settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_settings.bootstrap_servers)
    missing = kafka_settings.warnings_topic  # never created
    assert main(["dashboard", "--warnings-topic", missing, "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert f"topic {missing!r} does not exist" in err
    assert "Traceback" not in err


@pytest.mark.kafka
async def test_the_page_and_its_snapshot_are_served(kafka_settings: Settings) -> None:
    await create_topics(kafka_settings)
    topics = FeedTopics(kafka_settings.warnings_topic, f"{kafka_settings.app_id}-episodes")
    dashboard = await start_dashboard(
        kafka_settings, topics, host="127.0.0.1", port=0, since_seconds=0
    )
    try:
        async with ClientSession() as http:
            async with http.get(dashboard.url) as page:
                assert page.status == 200
                assert "/static/charts.js" in await page.text()
            async with http.get(f"{dashboard.url}static/charts.js") as script:
                assert script.headers["Content-Type"].startswith("text/javascript")
            async with http.get(f"{dashboard.url}static/..%2Fboard.py") as escape:
                assert escape.status == 404
            async with http.get(f"{dashboard.url}snapshot.json") as snapshot:
                body = await snapshot.json()
        assert body["totals"]["loops"] == 0
        assert body["topics"] == {
            "warnings": kafka_settings.warnings_topic,
            "episodes": topics.episodes,
            "episodes_found": False,
        }
    finally:
        await dashboard.stop()


@pytest.mark.kafka
async def test_the_demo_goes_on_when_its_page_cannot_start(kafka_settings: Settings) -> None:
    await create_topics(kafka_settings)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        out = io.StringIO()
        page = DemoPage(kafka_settings, taken.getsockname()[1], out=out)
        await page.start()
    assert page.dashboard is None
    assert "fleet page not started (cannot serve the page on 127.0.0.1:" in out.getvalue()
    assert "the demo goes on without it" in out.getvalue()
    await page.serve_until_interrupted()  # returns at once: there is no page to keep
    await page.stop()


@pytest.mark.kafka
async def test_the_feed_refuses_a_missing_topic(kafka_settings: Settings) -> None:
    topics = FeedTopics(kafka_settings.warnings_topic, "nothing")
    with pytest.raises(FeedError, match="does not exist"):
        await start_dashboard(kafka_settings, topics, host="127.0.0.1", port=0, since_seconds=0)
