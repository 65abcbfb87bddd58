"""The live fleet page next to the demo. The demo never depends on it: a page that cannot
start (port taken, topic missing) is reported in one line and the demo goes on."""

from __future__ import annotations

from typing import IO

from loopwatch.streams.fleetview.feed import FeedError, FeedTopics
from loopwatch.streams.fleetview.server import (
    Dashboard,
    DashboardError,
    start_dashboard,
    until_interrupted,
)
from loopwatch.streams.kafka.admin import BrokerUnreachable
from loopwatch.streams.settings import Settings


class DemoPage:
    def __init__(self, settings: Settings, port: int, out: IO[str] | None = None) -> None:
        self.settings = settings
        self.port = port
        self.out = out
        self.dashboard: Dashboard | None = None

    async def start(self) -> None:
        if self.port == 0:
            return
        topics = FeedTopics(
            warnings=self.settings.warnings_topic,
            episodes=self.settings.episodes_topic,
        )
        try:
            # only this run's loops: read from the topics' ends
            self.dashboard = await start_dashboard(
                self.settings, topics, host="127.0.0.1", port=self.port, since_seconds=0
            )
        except (BrokerUnreachable, FeedError, DashboardError) as exc:
            self._say(f"fleet page not started ({exc}); the demo goes on without it")
            return
        self._say(f"fleet page: {self.dashboard.url} (live loops of this run)")

    async def serve_until_interrupted(self) -> None:
        if self.dashboard is None:
            return
        self._say(f"the fleet page stays up at {self.dashboard.url}; Ctrl-C ends the demo")
        await until_interrupted()

    async def stop(self) -> None:
        if self.dashboard is not None:
            await self.dashboard.stop()
            self.dashboard = None

    def _say(self, line: str) -> None:
        print(line, file=self.out, flush=True)
