"""LangChain: `LoopwatchMiddleware` in `create_agent` (docs/frameworks.md)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool

from loopwatch.streams.client import MARKER, LoopwatchClient
from loopwatch.streams.client.langchain import LoopwatchMiddleware
from loopwatch.streams.settings import Settings


@tool
def search(query: str) -> str:
    """Search for flights."""
    return "no results"


class ScriptedModel(GenericFakeChatModel):
    """Stands in for your chat model: searches the same thing three times."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        for message in messages:
            if isinstance(message.content, str) and message.content.startswith(MARKER):
                print("the model was told:", message.content)
        return super()._generate(messages, *args, **kwargs)


async def main() -> None:
    call = {"name": "search", "args": {"query": "SFO-JFK direct"}}
    answers = [AIMessage("", tool_calls=[{**call, "id": f"c{n}"}]) for n in range(3)]
    model = ScriptedModel(messages=iter([*answers, AIMessage("No direct flight exists.")]))
    # broker and topics from the environment, as the worker reads them
    async with LoopwatchClient.from_settings(Settings.from_env()) as client:
        agent = create_agent(model, [search], middleware=[LoopwatchMiddleware(client)])
        thread = f"example-{uuid.uuid4().hex[:8]}"
        await agent.ainvoke(
            {"messages": [{"role": "user", "content": "Find a direct flight SFO-JFK."}]},
            {"configurable": {"thread_id": thread}},
        )
        await client.end_session(thread)


if __name__ == "__main__":
    asyncio.run(main())
