"""Pydantic AI: `LoopwatchCapability` on the agent (docs/frameworks.md)."""

from __future__ import annotations

import asyncio
import uuid

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from loopwatch.streams.client import MARKER, LoopwatchClient
from loopwatch.streams.client.pydantic_ai import LoopwatchCapability
from loopwatch.streams.settings import Settings


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for your model: searches the same thing three times."""
    for part in messages[-1].parts:
        if str(getattr(part, "content", "")).startswith(MARKER):
            print("the model was told:", part.content)  # type: ignore[union-attr]
    if len(messages) < 7:  # the prompt, then (call, result) pairs
        return ModelResponse(parts=[ToolCallPart("search", {"query": "SFO-JFK direct"})])
    return ModelResponse(parts=[TextPart("No direct flight exists.")])


async def main() -> None:
    # broker and topics from the environment, as the worker reads them
    async with LoopwatchClient.from_settings(Settings.from_env()) as client:
        session = f"example-{uuid.uuid4().hex[:8]}"
        agent = Agent(
            FunctionModel(scripted),
            capabilities=[LoopwatchCapability(client, session_id=session)],
        )

        @agent.tool_plain
        def search(query: str) -> str:
            """Search for flights."""
            return "no results"

        await agent.run("Find a direct flight SFO-JFK.")
        await client.end_session(session)


if __name__ == "__main__":
    asyncio.run(main())
