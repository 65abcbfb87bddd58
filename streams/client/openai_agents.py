"""OpenAI Agents SDK (`openai-agents`): a `call_model_input_filter` that places loopwatch
warnings into each model call (`pip install 'loopwatch[openai-agents]'`).

    run_config = RunConfig(call_model_input_filter=loopwatch_input_filter(client, "s-42"))
    await Runner.run(agent, "...", run_config=run_config)

The filter sees the Responses API input items about to be sent: it publishes the new ones
(docs/contract.md §6), waits for their verdicts (fail-open) and returns a copy of the
input with each warning as a `system` message item. The run's own items (what
`result.to_input_list()` gives) never contain a warning.

Function outputs carry no error flag. A tool that raised is answered by the SDK's
`default_tool_error_function` with a fixed text, which `sdk_tool_error` recognises, so
rule 1 (the same mutating call failing again) works with the SDK's defaults; a tool with
its own `failure_error_function` needs a `tool_error` of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agents import default_tool_error_function
from agents.run_config import CallModelData, CallModelInputFilter, ModelInputData

from loopwatch.streams.client.client import LoopwatchClient
from loopwatch.streams.client.history import ToolError

SessionIdOf = Callable[[CallModelData[Any]], str]

SDK_TOOL_ERROR_TEXT: str = default_tool_error_function(None, RuntimeError())  # type: ignore[arg-type]
"""What the SDK returns to the model for a tool that raised (its default; fixed text)."""


def sdk_tool_error(item: Mapping[str, Any]) -> str | None:
    """A `function_call_output` with the SDK's default failure text failed with it."""
    output = item.get("output")
    return output if output == SDK_TOOL_ERROR_TEXT else None


def loopwatch_input_filter(
    client: LoopwatchClient,
    session_id: str | SessionIdOf,
    *,
    agent_id: str | None = None,
    tool_error: ToolError = sdk_tool_error,
) -> CallModelInputFilter:
    """A `RunConfig.call_model_input_filter` for one session (or one per call of
    `session_id(data)`). `tool_error`: which function outputs are failures (default:
    the SDK's default failure text)."""

    async def place_warnings(data: CallModelData[Any]) -> ModelInputData:
        session = session_id if isinstance(session_id, str) else session_id(data)
        tracker = await client.tracker(
            session, "responses", agent_id=agent_id, tool_error=tool_error
        )
        items = [input_item(item) for item in data.model_data.input]
        placed: list[Any] = await tracker.prompt(items)  # plain dicts are valid input items
        return ModelInputData(input=placed, instructions=data.model_data.instructions)

    return place_warnings


def input_item(item: Any) -> dict[str, Any]:
    """A Responses input item as a plain dict (the SDK may hand over model objects)."""
    if isinstance(item, dict):
        return item
    dumped: dict[str, Any] = item.model_dump(exclude_unset=True)
    return dumped
