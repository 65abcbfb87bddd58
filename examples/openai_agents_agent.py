"""OpenAI Agents SDK: `loopwatch_input_filter` in `RunConfig` (docs/frameworks.md)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from loopwatch.streams.client import MARKER, LoopwatchClient
from loopwatch.streams.client.openai_agents import input_item, loopwatch_input_filter
from loopwatch.streams.settings import Settings


@function_tool
def search(query: str) -> str:
    """Search for flights."""
    return "no results"


class ScriptedModel(Model):
    """Stands in for your model: searches the same thing three times."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any) -> Any:
        for item in map(input_item, input):
            if str(item.get("content", "")).startswith(MARKER):
                print("the model was told:", item["content"])
        self.calls += 1
        if self.calls <= 3:
            output: list[Any] = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"call_{self.calls}",
                    name="search",
                    arguments='{"query": "SFO-JFK direct"}',
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text="No direct flight.", annotations=[])
            output = [
                ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main() -> None:
    # broker and topics from the environment, as the worker reads them
    async with LoopwatchClient.from_settings(Settings.from_env()) as client:
        session = f"example-{uuid.uuid4().hex[:8]}"
        agent = Agent(name="booker", model=ScriptedModel(), tools=[search])
        config = RunConfig(
            call_model_input_filter=loopwatch_input_filter(client, session),
            tracing_disabled=True,
        )
        await Runner.run(agent, "Find a direct flight SFO-JFK.", run_config=config)
        await client.end_session(session)


if __name__ == "__main__":
    asyncio.run(main())
