"""OpenAI Agents SDK (`openai-agents`): a `call_model_input_filter` that places loopwatch
warnings into each model call (`pip install 'loopwatch[openai-agents]'`).

    run_config = RunConfig(call_model_input_filter=loopwatch_input_filter(client, "s-42"))
    await Runner.run(agent, "...", run_config=run_config)

The filter sees the Responses API input items about to be sent: it publishes the new ones
(docs/contract.md §6), waits for their verdicts (fail-open) and returns a copy of the
input with each warning as a `system` message item (a `user` one when the agent's model
is not an OpenAI model, e.g. Claude through LiteLLM: `placement.model_family`). The run's
own items (what `result.to_input_list()` gives) never contain a warning. The agent id is
the agent's `name` unless `agent_id` says otherwise. Nothing raises into the run for
loopwatch's sake: an error of its own is logged and the input goes on unchanged. Only
with `stop_on_loop=True` (opt-in) does a warning of level 3, "stop advised"
(docs/contract.md §9.13), raise `LoopStopAdvised` out of `Runner.run`.

Function outputs carry no error flag. A tool that raised is answered by the SDK's
`default_tool_error_function` with a fixed text, which `sdk_tool_error` recognises, so
rule 1 (the same mutating call failing again) works with the SDK's defaults; a tool with
its own `failure_error_function` needs a `tool_error` of its own.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from agents import default_tool_error_function
from agents.run_config import CallModelData, CallModelInputFilter, ModelInputData

from loopwatch.streams.client.client import LoopwatchClient
from loopwatch.streams.client.escalation import LoopStopAdvised, LoopStopper, StopOnLoop
from loopwatch.streams.client.history import ToolError
from loopwatch.streams.client.placement import (
    ModelFamily,
    model_family,
    place_responses,
    system_messages_allowed,
)

log = logging.getLogger(__name__)

SessionIdOf = Callable[[CallModelData[Any]], str]

SDK_TOOL_ERROR_TEXT: str = default_tool_error_function(None, RuntimeError())  # type: ignore[arg-type]
"""What the SDK returns to the model for a tool that raised (its default; fixed text)."""


def sdk_tool_error(item: Mapping[str, Any]) -> str | None:
    """A `function_call_output` with the SDK's default failure text failed with it."""
    output = item.get("output")
    return output if output == SDK_TOOL_ERROR_TEXT else None


def loopwatch_input_filter(
    client: LoopwatchClient,
    session_id: str | SessionIdOf | None = None,
    *,
    agent_id: str | None = None,
    tool_error: ToolError = sdk_tool_error,
    family: ModelFamily | None = None,
    stop_on_loop: StopOnLoop = False,
) -> CallModelInputFilter:
    """A `RunConfig.call_model_input_filter` for one session (or one per call of
    `session_id(data)`; None: one generated id for this filter, logged once).
    `agent_id`: default the agent's name. `tool_error`: which function outputs are
    failures (default: the SDK's default failure text). `family`: the placement,
    default from the agent's model. `stop_on_loop`: at a warning of level 3 (stop
    advised), True raises `LoopStopAdvised` out of `Runner.run` before the model call,
    a callable is called with the warning instead; False (default): warnings only."""
    generated: list[str] = []
    stopper = LoopStopper(stop_on_loop)

    def session_of(data: CallModelData[Any]) -> str:
        if isinstance(session_id, str):
            return session_id
        if session_id is not None:
            return session_id(data)
        if not generated:
            generated.append(f"oa-{uuid.uuid4().hex}")
            log.warning(
                "loopwatch_input_filter: no session_id given; using %s for this filter",
                generated[0],
            )
        return generated[0]

    async def placed(data: CallModelData[Any]) -> ModelInputData:
        session = session_of(data)
        tracker = await client.tracker(
            session,
            "responses",
            agent_id=agent_id or getattr(data.agent, "name", None),
            tool_error=tool_error,
        )
        items = [input_item(item) for item in data.model_data.input]
        warnings = await tracker.warnings(items)
        stopper.after_wait(session, tracker.last_wait)
        if not warnings:
            return data.model_data
        role = "system" if system_messages_allowed(family or agent_family(data)) else "user"
        prompt: list[Any] = place_responses(items, warnings, role=role)  # dicts are items
        return ModelInputData(input=prompt, instructions=data.model_data.instructions)

    async def place_warnings(data: CallModelData[Any]) -> ModelInputData:
        try:
            return await placed(data)
        except LoopStopAdvised:  # the caller opted in to stopping the run
            raise
        except Exception as exc:  # fail-open: loopwatch never breaks the run
            log.warning("loopwatch_input_filter: %s; input left unchanged", type(exc).__name__)
            return data.model_data

    return place_warnings


def agent_family(data: CallModelData[Any]) -> ModelFamily:
    """The placement family of the agent's model (a name, or a `Model` object)."""
    model = getattr(data.agent, "model", None)
    if model is None or isinstance(model, str):
        return model_family(model)
    return model_family(getattr(model, "model", None), type(model).__name__)


def input_item(item: Any) -> dict[str, Any]:
    """A Responses input item as a plain dict (the SDK may hand over model objects)."""
    if isinstance(item, dict):
        return item
    dumped: dict[str, Any] = item.model_dump(exclude_unset=True)
    return dumped
