"""OpenAI Agents SDK (`openai-agents`): a `call_model_input_filter` that places loopwatch
warnings into each model call (`pip install 'loopwatch[openai-agents]'`).

    run_config = RunConfig(call_model_input_filter=loopwatch_input_filter(client, "s-42"))
    await Runner.run(agent, "...", run_config=run_config)

The filter sees the Responses API input items about to be sent: it publishes the new ones
(docs/contract.md §6), waits for their verdicts (fail-open) and returns a copy of the
input with each warning as a `system` message item. The run's own items (what
`result.to_input_list()` gives) never contain a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.run_config import CallModelData, CallModelInputFilter, ModelInputData

from loopwatch.streams.client.client import LoopwatchClient

SessionIdOf = Callable[[CallModelData[Any]], str]


def loopwatch_input_filter(
    client: LoopwatchClient, session_id: str | SessionIdOf, *, agent_id: str | None = None
) -> CallModelInputFilter:
    """A `RunConfig.call_model_input_filter` for one session (or one per call of
    `session_id(data)`)."""

    async def place_warnings(data: CallModelData[Any]) -> ModelInputData:
        session = session_id if isinstance(session_id, str) else session_id(data)
        tracker = await client.tracker(session, "responses", agent_id=agent_id)
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
