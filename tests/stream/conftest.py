"""faust `test_context()` harness: the real app with the memory store and recording sinks
in place of the output topics (no broker)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest

from models import AgentEvent
from streams.app import create_app
from tests.stream.settings_for_tests import stream_settings


@dataclass
class Sent:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None


@dataclass
class Harness:
    app: Any
    agent: Any
    sent: list[Sent] = field(default_factory=list)
    hold_acks: bool = False
    """When set, verdict sends stay unacknowledged (a broker that has not answered yet)."""
    pending: list[asyncio.Future[Any]] = field(default_factory=list)

    async def put(self, value: bytes | None, key: bytes | None = None) -> None:
        await self.agent.put(value, key=key)

    async def put_event(self, event: AgentEvent) -> None:
        await self.put(event.model_dump_json().encode(), key=event.session_id.encode())

    def on(self, topic: str) -> list[Sent]:
        return [s for s in self.sent if s.topic == topic]

    @property
    def table(self) -> Any:
        return self.app.loopwatch_table

    def metrics_text(self) -> str:
        text: str = self.app.loopwatch_metrics.exposition().decode()
        return text


def _recording_send(harness: Harness, name: str) -> Any:
    async def send(
        *, key: bytes | None = None, value: bytes | None = None, headers: Any = None, **_: Any
    ) -> asyncio.Future[Any]:
        harness.sent.append(Sent(name, key, value, headers))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if harness.hold_acks:
            harness.pending.append(future)
        else:
            future.set_result(None)
        return future

    return send


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {}


@pytest.fixture
async def harness_factory(
    settings_overrides: dict[str, Any],
) -> AsyncIterator[Callable[[], Awaitable[Harness]]]:
    """Start harnesses (each a fresh app, like a fresh worker process) on demand."""
    async with AsyncExitStack() as stack:

        async def start() -> Harness:
            app = create_app(stream_settings(**settings_overrides))
            app.finalize()
            agent = app.agents["loopwatch.process_events"]
            context = await stack.enter_async_context(agent.test_context())
            harness = Harness(app, context)
            topics = app.loopwatch_topics
            for name in ("verdicts", "warnings", "dead_letters"):
                stack.enter_context(
                    mock.patch.object(getattr(topics, name), "send", _recording_send(harness, name))
                )
            return harness

        yield start


@pytest.fixture
async def harness(harness_factory: Callable[[], Awaitable[Harness]]) -> Harness:
    return await harness_factory()
