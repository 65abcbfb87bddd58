"""OpenAI Agents SDK: a real `Runner.run` loop with a scripted model (the SDK ships no fake
model; this one implements its `Model` interface), the input filter against the real
broker and worker."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from loopwatch.models import LoopWarning
from loopwatch.streams.client import MARKER, LoopwatchClient
from loopwatch.streams.client.escalation import LoopStopAdvised, StopOnLoop
from loopwatch.streams.client.openai_agents import input_item, loopwatch_input_filter
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
from tests.support.prompt_rules import check_responses

pytestmark = pytest.mark.kafka


class ScriptedModel(Model):
    """Calls `search` LOOP_STEPS times, then answers; remembers every input it got."""

    def __init__(self, *, looping: bool, steps: int = LOOP_STEPS) -> None:
        self.looping = looping
        self.steps = steps
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append([input_item(item) for item in input])
        step = len(self.inputs) - 1
        output: list[Any]
        if step < self.steps:
            arguments = json.dumps(search_arguments(step, looping=self.looping))
            output = [
                ResponseFunctionToolCall(
                    type="function_call", call_id=f"call_{step}", name="search", arguments=arguments
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text="No such flight.", annotations=[])
            output = [
                ResponseOutputMessage(
                    id="msg_1", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the test runs without streaming")


@function_tool
def search(query: str) -> str:
    """Search for flights."""
    return search_result({"query": query})


async def run_agent(client: LoopwatchClient, *, looping: bool, session: str) -> Any:
    model = ScriptedModel(looping=looping)
    agent = Agent(name="booker", instructions="Book flights.", model=model, tools=[search])
    config = RunConfig(
        call_model_input_filter=loopwatch_input_filter(client, session), tracing_disabled=True
    )
    result = await Runner.run(agent, "find me a direct flight", run_config=config)
    await client.end_session(session)
    return model.inputs, result.to_input_list()


async def test_the_warning_reaches_the_next_input_and_never_the_run_items(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        inputs, stored = await run_agent(client, looping=True, session="oa-looping")
        clean_inputs, clean_stored = await run_agent(client, looping=False, session="oa-clean")

    assert_warned_before_the_last_call_only(inputs, clean_inputs)
    last = inputs[LOOP_STEPS]
    check_responses(last)
    placed = next(i for i, item in enumerate(last) if item.get("role") == "system")
    assert last[placed - 1]["type"] == "function_call_output"
    assert last[placed]["content"].startswith(MARKER)
    assert "repeated_result" in json.dumps(last[placed:])
    assert warnings_in(stored) == []
    assert warnings_in(clean_stored) == []


async def run_long_loop(
    client: LoopwatchClient, session: str, stop_on_loop: StopOnLoop
) -> tuple[list[list[dict[str, Any]]], LoopStopAdvised | None]:
    model = ScriptedModel(looping=True, steps=STOP_STEPS)
    agent = Agent(name="booker", instructions="Book flights.", model=model, tools=[search])
    placing = loopwatch_input_filter(client, session, stop_on_loop=stop_on_loop)
    config = RunConfig(call_model_input_filter=placing, tracing_disabled=True)
    stopped = None
    try:
        await Runner.run(agent, "find me a direct flight", run_config=config, max_turns=20)
    except LoopStopAdvised as exc:
        stopped = exc
    await client.end_session(session)
    return model.inputs, stopped


async def test_stop_on_loop_stops_the_run_at_stop_advised_only_when_opted_in(
    extended_worker: WorkerProcess, e2e_settings: Settings
) -> None:
    called: list[LoopWarning] = []
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        plain, not_stopped = await run_long_loop(client, "oa-stop-off", False)
        cut, stopped = await run_long_loop(client, "oa-stop-on", True)
        recorded, not_stopped_either = await run_long_loop(client, "oa-stop-cb", called.append)

    assert not_stopped is None and len(plain) == STOP_STEPS + 1
    advised = first_stop_advised(plain)
    # Runner.run raises the typed exception itself, before the model call
    assert stopped is not None and stopped.warning.level == 3
    assert stopped.warning.rule == "repeated_result" and "stop advised" in str(stopped)
    assert len(cut) == advised
    assert not_stopped_either is None and len(recorded) == STOP_STEPS + 1
    assert called and {(w.rule, w.level) for w in called} == {("repeated_result", 3)}
    assert called[0].count == stopped.warning.count
