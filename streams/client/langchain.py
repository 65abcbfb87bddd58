"""LangChain / LangGraph (`langchain>=1`): an `AgentMiddleware` that places loopwatch
warnings into each model request (`pip install 'loopwatch[langchain]'`).

    agent = create_agent(model, tools, middleware=[LoopwatchMiddleware(client)])
    await agent.ainvoke({"messages": [...]}, {"configurable": {"thread_id": "s-42"}})

Before each model call it publishes the messages of the request that are new (as OpenAI
Chat messages, docs/contract.md §6), waits for their verdicts (fail-open) and hands the
model a copy of the messages with each warning as a `SystemMessage` after its message,
through `request.override(messages=...)`: the agent's state never contains a warning.
A `ToolMessage` with `status="error"` is a failed result. The session is the LangGraph
thread (`thread_id`) unless `session_id` says otherwise.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langgraph.config import get_config

from loopwatch.streams.client.client import LoopwatchClient
from loopwatch.streams.client.placement import openai_points

SessionIdOf = Callable[[ModelRequest[Any]], str]


class LoopwatchMiddleware(AgentMiddleware[Any, Any, Any]):
    """Places loopwatch warnings into every model request of a LangChain agent."""

    def __init__(
        self,
        client: LoopwatchClient,
        *,
        session_id: str | SessionIdOf | None = None,
        agent_id: str | None = None,
    ) -> None:
        """`session_id`: a fixed id, a function of the request, or None for the
        LangGraph `thread_id` of the run."""
        super().__init__()
        self.client = client
        self._session_id = session_id
        self._agent_id = agent_id

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        return await handler(await self._placed(request))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        # A synchronous agent: the client's loop must run in another thread.
        loop = self.client.loop
        if loop is None or _running_loop() is loop:
            raise RuntimeError(
                "LoopwatchMiddleware in a synchronous agent needs the LoopwatchClient "
                "started on an event loop in another thread; or use ainvoke()/astream()"
            )
        placed = asyncio.run_coroutine_threadsafe(self._placed(request), loop).result()
        return handler(placed)

    async def _placed(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        tracker = await self.client.tracker(
            self._session_of(request), "openai", agent_id=self._agent_id, tool_error=_tool_error
        )
        messages = list(request.messages)
        warnings = await tracker.warnings([chat_message(m) for m in messages])
        if not warnings:
            return request
        points = openai_points([chat_message(m) for m in messages], warnings)
        placed: list[Any] = []
        for index, message in enumerate(messages):
            placed.append(message)
            placed.extend(SystemMessage(content=text) for text in points.get(index, ()))
        return request.override(messages=placed)

    def _session_of(self, request: ModelRequest[Any]) -> str:
        if isinstance(self._session_id, str):
            return self._session_id
        if self._session_id is not None:
            return self._session_id(request)
        thread = get_config().get("configurable", {}).get("thread_id")
        if thread is None:
            raise ValueError(
                "LoopwatchMiddleware: no session id: run the agent with "
                '{"configurable": {"thread_id": ...}} or pass session_id='
            )
        return str(thread)


def chat_message(message: BaseMessage) -> dict[str, Any]:
    """A LangChain message as an OpenAI Chat message (only what detection reads)."""
    if isinstance(message, ToolMessage):
        chat = {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
        return {**chat, "status": message.status}
    if isinstance(message, AIMessage):
        calls = [
            {
                "id": call.get("id") or "",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
            }
            for call in message.tool_calls
        ]
        return {"role": "assistant", "content": message.text, "tool_calls": calls}
    role = {"human": "user", "system": "system"}.get(message.type, message.type)
    return {"role": role, "content": message.content}


def _tool_error(result: dict[str, Any] | Any) -> str | None:
    if result.get("status") != "error":
        return None
    content = result.get("content")
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


__all__: Sequence[str] = ("LoopwatchMiddleware", "chat_message")
