"""LangChain: a real `create_agent` loop driven by LangChain's fake chat model, with the
middleware against the real broker and worker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from loopwatch.models import LoopWarning
from loopwatch.streams.client import MARKER, LoopwatchClient
from loopwatch.streams.client.escalation import LoopStopAdvised, StopOnLoop
from loopwatch.streams.client.langchain import LoopwatchMiddleware
from loopwatch.streams.demo.worker_process import WorkerProcess
from loopwatch.streams.settings import Settings
from tests.e2e.frameworks import (
    LOOP_STEPS,
    STOP_STEPS,
    VERDICT_TIMEOUT,
    assert_warned_before_the_last_call_only,
    first_stop_advised,
    search_arguments,
    search_result,
    warnings_in,
)

pytestmark = pytest.mark.kafka


class RecordingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, which also remembers every request it was sent."""

    requests: list[list[BaseMessage]]

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self  # the scripted answers already name the tools

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def search(query: str) -> str:
    """Search for flights."""
    return search_result({"query": query})


def scripted_model(*, looping: bool, steps: int = LOOP_STEPS) -> RecordingFakeModel:
    answers: list[AIMessage | str] = [
        AIMessage(
            content="",
            tool_calls=[
                {"name": "search", "args": search_arguments(n, looping=looping), "id": f"c{n}"}
            ],
        )
        for n in range(steps)
    ]
    answers.append(AIMessage(content="There is no such flight."))
    return RecordingFakeModel(messages=iter(answers), requests=[])


async def run_agent(
    client: LoopwatchClient, *, looping: bool, thread: str, sync: bool = False
) -> Any:
    model = scripted_model(looping=looping)
    agent = create_agent(model, [search], middleware=[LoopwatchMiddleware(client)])
    request = {"messages": [{"role": "user", "content": "find me a direct flight"}]}
    config: Any = {"configurable": {"thread_id": thread}}
    if sync:  # a synchronous agent in its own thread; the client stays on this loop
        state = await asyncio.to_thread(agent.invoke, request, config)
    else:
        state = await agent.ainvoke(request, config)
    await client.end_session(thread)
    return model.requests, state["messages"]


async def test_the_warning_reaches_the_next_request_and_never_the_state(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        requests, stored = await run_agent(client, looping=True, thread="lc-looping")
        clean_requests, clean_stored = await run_agent(client, looping=False, thread="lc-clean")
        sync_requests, _ = await run_agent(client, looping=True, thread="lc-sync", sync=True)

    assert_warned_before_the_last_call_only(requests, clean_requests)
    last = requests[LOOP_STEPS]
    # right after the third tool result, as system messages
    placed = next(i for i, m in enumerate(last) if isinstance(m, SystemMessage))
    assert isinstance(last[placed - 1], ToolMessage)
    assert str(last[placed].content).startswith(MARKER)
    assert "repeated_result" in " ".join(str(m.content) for m in last[placed:])
    assert warnings_in(stored) == []  # the agent's history never holds a warning
    assert not any(isinstance(m, SystemMessage) for m in stored)
    assert warnings_in(clean_stored) == []
    # wrap_model_call (sync) places the same warning at the same point
    assert [len(warnings_in(r)) for r in sync_requests] == [len(warnings_in(r)) for r in requests]


async def run_long_loop(
    client: LoopwatchClient, thread: str, stop_on_loop: StopOnLoop
) -> tuple[list[list[BaseMessage]], LoopStopAdvised | None]:
    model = scripted_model(looping=True, steps=STOP_STEPS)
    middleware = LoopwatchMiddleware(client, stop_on_loop=stop_on_loop)
    agent = create_agent(model, [search], middleware=[middleware])
    request = {"messages": [{"role": "user", "content": "find me a direct flight"}]}
    stopped = None
    try:
        await agent.ainvoke(request, {"configurable": {"thread_id": thread}})
    except LoopStopAdvised as exc:
        stopped = exc
    await client.end_session(thread)
    return model.requests, stopped


async def test_stop_on_loop_stops_the_run_at_stop_advised_only_when_opted_in(
    extended_worker: WorkerProcess, e2e_settings: Settings
) -> None:
    called: list[LoopWarning] = []
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        plain, not_stopped = await run_long_loop(client, "lc-stop-off", False)
        cut, stopped = await run_long_loop(client, "lc-stop-on", True)
        recorded, not_stopped_either = await run_long_loop(client, "lc-stop-cb", called.append)

    # default off: the whole run, level-3 warnings placed and nothing stopped
    assert not_stopped is None and len(plain) == STOP_STEPS + 1
    advised = first_stop_advised(plain)
    # opted in: stopped before the model call that would have carried it, with the reason
    assert stopped is not None and stopped.warning.level == 3
    assert stopped.warning.rule == "repeated_result" and "stop advised" in str(stopped)
    assert len(cut) == advised
    # a callback instead: called with that warning, then once per new one as the loop
    # goes on (never twice with the same), and the run goes on
    assert not_stopped_either is None and len(recorded) == STOP_STEPS + 1
    assert called and {(w.rule, w.level) for w in called} == {("repeated_result", 3)}
    assert called[0].count == stopped.warning.count
    assert [w.count for w in called] == sorted({w.count for w in called})
