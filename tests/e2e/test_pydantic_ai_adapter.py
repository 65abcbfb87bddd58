"""Pydantic AI: a real agent run driven by Pydantic AI's `FunctionModel`, with the
capability against the real broker and worker."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from loopwatch.models import LoopWarning
from loopwatch.streams.client import MARKER, LoopwatchClient
from loopwatch.streams.client.escalation import LoopStopAdvised, StopOnLoop
from loopwatch.streams.client.pydantic_ai import LoopwatchCapability
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


def scripted(
    looping: bool, requests: list[list[ModelMessage]], steps: int = LOOP_STEPS
) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(list(messages))
        step = len(requests) - 1
        if step < steps:
            arguments = search_arguments(step, looping=looping)
            return ModelResponse(parts=[ToolCallPart("search", arguments, f"call_{step}")])
        return ModelResponse(parts=[TextPart("No such flight.")])

    return FunctionModel(answer)


async def run_agent(client: LoopwatchClient, *, looping: bool, session: str) -> Any:
    requests: list[list[ModelMessage]] = []
    agent = Agent(
        scripted(looping, requests),
        capabilities=[LoopwatchCapability(client, session_id=session)],
    )

    @agent.tool_plain
    def search(query: str) -> str:
        """Search for flights."""
        return search_result({"query": query})

    result = await agent.run("find me a direct flight")
    await client.end_session(session)
    return requests, result.all_messages()


async def test_the_warning_reaches_the_next_request_and_never_the_history(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        requests, stored = await run_agent(client, looping=True, session="pa-looping")
        clean_requests, clean_stored = await run_agent(client, looping=False, session="pa-clean")

    assert_warned_before_the_last_call_only(requests, clean_requests)
    last = requests[LOOP_STEPS][-1]
    assert isinstance(last, ModelRequest)
    # in the request that carries the third result, after it
    kinds = [type(part) for part in last.parts]
    assert kinds[0] is ToolReturnPart and kinds[-1] is UserPromptPart
    assert str(last.parts[-1].content).startswith(MARKER)
    assert "repeated_result" in str([p.content for p in last.parts])
    assert warnings_in(stored) == []  # the run's history never holds a warning
    assert warnings_in(clean_stored) == []


async def run_long_loop(
    client: LoopwatchClient, session: str, stop_on_loop: StopOnLoop
) -> tuple[list[list[ModelMessage]], LoopStopAdvised | None]:
    requests: list[list[ModelMessage]] = []
    capability = LoopwatchCapability(client, session_id=session, stop_on_loop=stop_on_loop)
    agent = Agent(scripted(True, requests, STOP_STEPS), capabilities=[capability])

    @agent.tool_plain
    def search(query: str) -> str:
        """Search for flights."""
        return search_result({"query": query})

    stopped = None
    try:
        await agent.run("find me a direct flight")
    except LoopStopAdvised as exc:
        stopped = exc
    await client.end_session(session)
    return requests, stopped


async def test_stop_on_loop_stops_the_run_at_stop_advised_only_when_opted_in(
    extended_worker: WorkerProcess, e2e_settings: Settings
) -> None:
    called: list[LoopWarning] = []
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        plain, not_stopped = await run_long_loop(client, "pa-stop-off", False)
        cut, stopped = await run_long_loop(client, "pa-stop-on", True)
        recorded, not_stopped_either = await run_long_loop(client, "pa-stop-cb", called.append)

    assert not_stopped is None and len(plain) == STOP_STEPS + 1
    advised = first_stop_advised(plain)
    assert stopped is not None and stopped.warning.level == 3
    assert stopped.warning.rule == "repeated_result" and "stop advised" in str(stopped)
    assert len(cut) == advised
    assert not_stopped_either is None and len(recorded) == STOP_STEPS + 1
    assert called and {(w.rule, w.level) for w in called} == {("repeated_result", 3)}
    assert called[0].count == stopped.warning.count
