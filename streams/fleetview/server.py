"""The live fleet page: aiohttp serves the page, its assets, a JSON snapshot and a stream of
snapshots as server-sent events (one per change, at most `MAX_UPDATES_PER_SECOND`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from loopwatch.streams.fleetview.assets import asset, content_type
from loopwatch.streams.fleetview.board import FleetBoard
from loopwatch.streams.fleetview.feed import BoardFeed, FeedTopics, cancel_quietly
from loopwatch.streams.fleetview.guard import add_security_headers, token_middleware
from loopwatch.streams.settings import Settings

log = logging.getLogger(__name__)

"""The fleet page's port unless told otherwise (`loopwatch dashboard`, the demo)."""
MAX_UPDATES_PER_SECOND = 4
KEEPALIVE_SECONDS = 15.0
"""A comment line this often keeps proxies from closing an idle event stream."""


class DashboardError(RuntimeError):
    """The page cannot start (port taken, bad address); the message says why."""


class ChangeHub:
    """Wakes every event stream when the board changed."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            return False
        return True


@dataclass
class Dashboard:
    """The running page: its feed, its web server and its address."""

    feed: BoardFeed
    runner: web.AppRunner
    task: asyncio.Task[None]
    url: str

    async def stop(self) -> None:
        await cancel_quietly(self.task)
        await self.feed.stop()
        await self.runner.cleanup()


def _report_end(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the fleet page stopped reading Kafka: %s", task.exception())


def snapshot(feed: BoardFeed) -> dict[str, Any]:
    return {
        **feed.board.snapshot(),
        "topics": {
            "warnings": feed.topics.warnings,
            "episodes": feed.topics.episodes,
            "episodes_found": feed.episodes_found,
        },
    }


def build_app(feed: BoardFeed, hub: ChangeHub, token: str | None = None) -> web.Application:
    """The page's routes; with `token`, every one needs it (`streams.fleetview.guard`)."""

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=asset("index.html"), content_type="text/html")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            body = asset(name)
        except FileNotFoundError:
            raise web.HTTPNotFound() from None
        return web.Response(text=body, headers={"Content-Type": content_type(name)})

    async def snapshot_json(request: web.Request) -> web.Response:
        return web.json_response(snapshot(feed))

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):  # the page was closed
            await _stream(response)
        return response

    async def _stream(response: web.StreamResponse) -> None:
        sent = -1
        while True:
            version = feed.board.version
            if version != sent:
                sent = version
                data = json.dumps(snapshot(feed), separators=(",", ":"))
                await response.write(f"data: {data}\n\n".encode())
                # coalesce a burst of records into one update
                await asyncio.sleep(1 / MAX_UPDATES_PER_SECOND)
            if not await hub.wait(KEEPALIVE_SECONDS) and feed.board.version == sent:
                await response.write(b": keepalive\n\n")

    app = web.Application(middlewares=[] if token is None else [token_middleware(token)])
    app.on_response_prepare.append(add_security_headers)
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/snapshot.json", snapshot_json)
    app.router.add_get("/events", events)
    return app


async def start_dashboard(
    settings: Settings,
    topics: FeedTopics,
    *,
    host: str,
    port: int,
    since_seconds: float,
) -> Dashboard:
    """Connect the feed and serve the page; raises BrokerUnreachable, FeedError or
    DashboardError with a message fit for the user."""
    hub = ChangeHub()
    feed = BoardFeed(settings, topics, FleetBoard(), hub.notify, since_seconds)
    await feed.start()
    token = settings.dashboard_token
    app = build_app(feed, hub, None if token is None else token.get_secret_value())
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        await feed.stop()
        raise DashboardError(f"cannot serve the page on {host}:{port}: {exc.strerror}") from None
    bound = runner.addresses[0][1] if runner.addresses else port  # port 0: the OS's choice
    task = asyncio.create_task(feed.run(), name="loopwatch-dashboard-feed")
    task.add_done_callback(_report_end)
    shown = f"[{host}]" if ":" in host else host
    return Dashboard(feed, runner, task, f"http://{shown}:{bound}/")


async def until_interrupted() -> None:
    """Return at SIGINT (Ctrl-C) or SIGTERM; the handlers are removed again."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
