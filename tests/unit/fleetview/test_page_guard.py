"""The fleet page's web surface: the bearer token (header, or the one-time `?token=` that
becomes a cookie), the security headers on every response, and no tool content in any
response even when the events held a secret."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from loopwatch.streams.fleetview.board import FleetBoard
from loopwatch.streams.fleetview.feed import BoardFeed, FeedTopics
from loopwatch.streams.fleetview.guard import CONTENT_SECURITY_POLICY, COOKIE, session_value
from loopwatch.streams.fleetview.server import ChangeHub, build_app
from loopwatch.streams.settings import Settings, SettingsError
from tests.support.secret_run import SECRET, board_of_a_secret_run

TOKEN = "a-long-dashboard-token-1234"
PAGES = ("/", "/static/page.js", "/static/style.css", "/snapshot.json")


@pytest.fixture
def board_and_events() -> tuple[FleetBoard, list[str]]:
    return board_of_a_secret_run()


async def _client(board: FleetBoard, token: str | None) -> TestClient:  # type: ignore[type-arg]
    feed = BoardFeed(Settings(), FeedTopics("w", "e"), board, lambda: None, since_seconds=0)
    client: TestClient = TestClient(TestServer(build_app(feed, ChangeHub(), token)))  # type: ignore[type-arg]
    await client.start_server()
    return client


@pytest.fixture
async def open_page(
    board_and_events: tuple[FleetBoard, list[str]],
) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    client = await _client(board_and_events[0], None)
    yield client
    await client.close()


@pytest.fixture
async def closed_page(
    board_and_events: tuple[FleetBoard, list[str]],
) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    client = await _client(board_and_events[0], TOKEN)
    yield client
    await client.close()


async def _first_event(client: TestClient, **kwargs: object) -> str:  # type: ignore[type-arg]
    response = await client.get("/events", **kwargs)  # type: ignore[arg-type]
    assert response.status == 200
    line = await response.content.readline()
    response.close()
    return line.decode()


async def test_no_response_carries_tool_arguments_results_or_errors(
    open_page: TestClient,  # type: ignore[type-arg]
    board_and_events: tuple[FleetBoard, list[str]],
) -> None:
    _, events = board_and_events
    assert all(SECRET in e for e in events if "tool" in e)  # the control
    bodies = [await (await open_page.get(path)).text() for path in PAGES]
    bodies.append(await _first_event(open_page))
    snapshot = json.loads(bodies[3])
    assert snapshot["totals"]["warnings"] >= 2 and snapshot["recent"]  # not an empty page
    assert {"edit_file", "read_file"} <= {name for name, _ in snapshot["top_tools"]}
    for body in bodies:
        assert SECRET not in body


@pytest.mark.parametrize("path", [*PAGES, "/events"])
async def test_every_response_sets_the_security_headers(
    open_page: TestClient,  # type: ignore[type-arg]
    path: str,
) -> None:
    response = await open_page.get(path)
    assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    response.close()


@pytest.mark.parametrize("path", [*PAGES, "/events"])
async def test_with_a_token_nothing_is_served_without_it(
    closed_page: TestClient,  # type: ignore[type-arg]
    path: str,
) -> None:
    for headers in ({}, {"Authorization": "Bearer not-the-token-at-all"}):
        response = await closed_page.get(path, headers=headers)
        assert response.status == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert "Content-Security-Policy" in response.headers
        assert SECRET not in await response.text() and TOKEN not in await response.text()


async def test_the_bearer_header_opens_every_page(
    closed_page: TestClient,  # type: ignore[type-arg]
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for path in PAGES:
        assert (await closed_page.get(path, headers=headers)).status == 200
    assert (await _first_event(closed_page, headers=headers)).startswith("data: ")


async def test_the_one_time_token_becomes_a_cookie_the_page_then_uses(
    closed_page: TestClient,  # type: ignore[type-arg]
) -> None:
    wrong = await closed_page.get("/?token=guess-guess-guess", allow_redirects=False)
    assert wrong.status == 401 and not wrong.cookies
    response = await closed_page.get(f"/?token={TOKEN}", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/"
    cookie = response.cookies[COOKIE]
    assert cookie.value == session_value(TOKEN) and TOKEN not in cookie.value
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    # the browser now holds the cookie: the page, its snapshot and its event stream work
    assert (await closed_page.get("/")).status == 200
    assert (await closed_page.get("/snapshot.json")).status == 200
    assert (await _first_event(closed_page)).startswith("data: ")


@pytest.mark.parametrize("raw", ["short", "has a space in it somewhere"])
def test_a_weak_token_is_refused_without_showing_it(raw: str) -> None:
    with pytest.raises(SettingsError) as error:
        Settings.from_env({"LOOPWATCH_DASHBOARD_TOKEN": raw})
    assert "LOOPWATCH_DASHBOARD_TOKEN" in str(error.value) and raw not in str(error.value)
