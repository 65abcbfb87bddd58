"""LangChain / LangGraph (`langchain>=1`): an `AgentMiddleware` that places loopwatch
warnings into each model request (`pip install 'loopwatch[langchain]'`).

    agent = create_agent(model, tools, middleware=[LoopwatchMiddleware(client)])
    await agent.ainvoke({"messages": [...]}, {"configurable": {"thread_id": "s-42"}})

Before each model call it publishes the messages of the request that are new (as OpenAI
Chat messages, docs/contract.md §6), waits for their verdicts (fail-open) and hands the
model a copy of the messages with each warning after its message (after the run of tool
messages of a tool step), through `request.override(messages=...)`: the agent's state
never contains a warning. The placement follows the model being called
(`placement.model_family`): a `SystemMessage` for OpenAI models, a `HumanMessage` for
Anthropic, Gemini and Bedrock models, whose integrations merge it into the user turn of
the tool results (they accept one system prompt only, in front).

A `ToolMessage` with `status="error"` is a failed result. The session is the LangGraph
thread (`thread_id`) unless `session_id` says otherwise; a run without either gets an id
derived from its first message (logged once). The agent id is the agent's name
(`create_agent(..., name=...)`) unless `agent_id` says otherwise.

Nothing here raises into the agent for loopwatch's sake: an error of loopwatch's own
(never the model's) is logged and the request goes to the model unchanged. Only with
`stop_on_loop=True` (opt-in) does a warning of level 3, "stop advised" (docs/contract.md
§9.13), raise `LoopStopAdvised` out of the run, before the model call it would go to.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.config import get_config

from loopwatch.streams.client.client import LoopwatchClient
from loopwatch.streams.client.escalation import LoopStopAdvised, LoopStopper, StopOnLoop
from loopwatch.streams.client.placement import (
    ModelFamily,
    model_family,
    openai_points,
    system_messages_allowed,
)

log = logging.getLogger(__name__)

SessionIdOf = Callable[[ModelRequest[Any]], str]


class LoopwatchMiddleware(AgentMiddleware[Any, Any, Any]):
    """Places loopwatch warnings into every model request of a LangChain agent."""

    def __init__(
        self,
        client: LoopwatchClient,
        *,
        session_id: str | SessionIdOf | None = None,
        agent_id: str | None = None,
        family: ModelFamily | None = None,
        stop_on_loop: StopOnLoop = False,
    ) -> None:
        """`session_id`: a fixed id, a function of the request, or None for the
        LangGraph `thread_id` of the run. `agent_id`: default the agent's name.
        `family`: the placement, default from the model of each request.
        `stop_on_loop`: at a warning of level 3 (stop advised), True raises
        `LoopStopAdvised` out of the agent's run before the model call, a callable is
        called with the warning instead; False (default): warnings only."""
        super().__init__()
        self.client = client
        self._stopper = LoopStopper(stop_on_loop)
        self._session_id = session_id
        self._agent_id = agent_id
        self._family = family
        self._warned_no_session = False
        self._fallback_id = uuid.uuid4().hex

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        try:
            placed = await self._placed(request)
        except LoopStopAdvised:  # the caller opted in to stopping the run
            raise
        except Exception as exc:  # fail-open: loopwatch never breaks the agent
            log.warning("loopwatch middleware: %s; request left unchanged", type(exc).__name__)
            placed = request
        return await handler(placed)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        # A synchronous agent: the client's loop must run in another thread.
        loop = self.client.loop
        if loop is None or _running_loop() is loop:
            log.warning(
                "LoopwatchMiddleware in a synchronous agent needs the LoopwatchClient "
                "started on an event loop in another thread (or use ainvoke()/astream()); "
                "this request goes without loop detection"
            )
            return handler(request)
        config = _config()
        try:
            placed = asyncio.run_coroutine_threadsafe(self._placed(request, config), loop).result()
        except LoopStopAdvised:  # the caller opted in to stopping the run
            raise
        except Exception as exc:  # fail-open
            log.warning("loopwatch middleware: %s; request left unchanged", type(exc).__name__)
            placed = request
        return handler(placed)

    async def _placed(
        self, request: ModelRequest[Any], config: dict[str, Any] | None = None
    ) -> ModelRequest[Any]:
        config = _config() if config is None else config
        session_id = self._session_of(request, config)
        tracker = await self.client.tracker(
            session_id,
            "openai",
            agent_id=self._agent_id or config.get("metadata", {}).get("lc_agent_name"),
            tool_error=_tool_error,
        )
        messages = list(request.messages)
        warnings = await tracker.warnings([chat_message(m) for m in messages])
        self._stopper.after_wait(session_id, tracker.last_wait)
        if not warnings:
            return request
        family = self._family or family_of(request.model)
        make: Callable[[str], BaseMessage] = (
            SystemMessage if system_messages_allowed(family) else HumanMessage
        )
        points = openai_points([chat_message(m) for m in messages], warnings)
        placed: list[Any] = []
        for index, message in enumerate(messages):
            placed.append(message)
            placed.extend(make(text) for text in points.get(index, ()))
        return request.override(messages=placed)

    def _session_of(self, request: ModelRequest[Any], config: dict[str, Any]) -> str:
        if isinstance(self._session_id, str):
            return self._session_id
        if self._session_id is not None:
            return self._session_id(request)
        thread = config.get("configurable", {}).get("thread_id")
        if thread is not None:
            return str(thread)
        # No thread: the run's first message is the same object (and id) on every model
        # call of the run, and across runs that carry the history on.
        first = request.messages[0] if request.messages else None
        anchor = getattr(first, "id", None) or self._fallback_id
        if not self._warned_no_session:
            self._warned_no_session = True
            log.warning(
                "LoopwatchMiddleware: the run has no thread_id and no session_id was "
                "given; using an id derived from the run's first message (lc-%s...)",
                anchor[:8],
            )
        return f"lc-{anchor}"


def family_of(model: Any) -> ModelFamily:
    """The placement family of a LangChain chat model (provider, model name, class)."""
    params: dict[str, Any] = {}
    get_params = getattr(model, "_get_ls_params", None)
    if callable(get_params):
        try:
            params = dict(get_params())
        except Exception:  # a model without its own params: the class name decides
            params = {}
    return model_family(
        params.get("ls_provider"), params.get("ls_model_name"), type(model).__name__
    )


def _config() -> dict[str, Any]:
    try:
        return dict(get_config())
    except RuntimeError:  # outside a LangGraph run
        return {}


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


__all__: Sequence[str] = ("LoopwatchMiddleware", "chat_message", "family_of")
