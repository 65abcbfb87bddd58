"""The fleet page behind its token, in a real browser: opened once with `?token=`, it
drops the token from the address, draws the board from its snapshot and event stream
(through the cookie), and breaks no rule of its Content-Security-Policy."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp.test_utils import TestServer
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from loopwatch.streams.fleetview.board import FleetBoard
from loopwatch.streams.fleetview.feed import BoardFeed, FeedTopics
from loopwatch.streams.fleetview.server import ChangeHub, build_app
from loopwatch.streams.settings import Settings
from tests.support.browser import headless_chromium
from tests.support.secret_run import SECRET, board_of_a_secret_run

TOKEN = "browser-test-token-0123456789"
PAGE_DEADLINE_SECONDS = 60.0


def _open_with_token(base: str, board: FleetBoard, tmp_path: Path) -> dict[str, object]:
    with headless_chromium(tmp_path / "chromium-profile") as driver:
        driver.get(f"{base}?token={TOKEN}")
        WebDriverWait(driver, PAGE_DEADLINE_SECONDS).until(
            lambda d: (
                d.execute_script("return document.body.dataset.warnings") == str(board.warnings)
            )
        )
        return {
            "url": driver.current_url,
            "text": driver.execute_script("return document.documentElement.outerHTML"),
            "console": _console(driver),
        }


def _console(driver: WebDriver) -> list[str]:
    try:
        return [str(entry.get("message", "")) for entry in driver.get_log("browser")]
    except Exception:  # a driver without the log endpoint: nothing to check there
        return []


async def test_the_page_works_in_a_browser_behind_its_token(tmp_path: Path) -> None:
    board, _events = board_of_a_secret_run()
    feed = BoardFeed(Settings(), FeedTopics("w", "e"), board, lambda: None, since_seconds=0)
    server = TestServer(build_app(feed, ChangeHub(), TOKEN), host="127.0.0.1")
    await server.start_server()
    try:
        base = str(server.make_url("/"))
        seen = await asyncio.to_thread(_open_with_token, base, board, tmp_path)
    finally:
        await server.close()
    assert TOKEN not in str(seen["url"])
    assert SECRET not in str(seen["text"])
    assert not [line for line in seen["console"] if "Content Security Policy" in line]  # type: ignore[attr-defined]
