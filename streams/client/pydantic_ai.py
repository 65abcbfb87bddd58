"""Pydantic AI: a capability whose `before_model_request` hook places loopwatch warnings
into each model request (`pip install 'loopwatch[pydantic-ai]'`).

    agent = Agent(model, tools=[...], capabilities=[LoopwatchCapability(client)])

Before each request it publishes the new messages (read as Anthropic Messages: a
`ModelRequest` is a user turn, a `ModelResponse` an assistant turn, docs/contract.md §6),
waits for their verdicts (fail-open) and adds each warning as a `UserPromptPart` to a
copy of the request it belongs to. Pydantic AI sends `request_context.messages` for this
request only, so the run's message history never contains a warning. A tool retry
(`RetryPromptPart` naming a tool) is a failed result. The session is the run's
`conversation_id` (or its `run_id`) unless `session_id` says otherwise; the agent id is
the agent's `name`. A `UserPromptPart` is valid user content for every provider
(OpenAI, Anthropic, Gemini, Bedrock), so the placement is the same for all. Nothing
raises into the run for loopwatch's sake: an error of its own is logged and the request
goes to the model unchanged. Only with `stop_on_loop=True` (opt-in) does a warning of
level 3, "stop advised" (docs/contract.md §9.13), raise `LoopStopAdvised` out of the run.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext

from loopwatch.streams.client.client import LoopwatchClient
from loopwatch.streams.client.escalation import LoopStopAdvised, LoopStopper, StopOnLoop
from loopwatch.streams.client.placement import warning_text

log = logging.getLogger(__name__)

SessionIdOf = Callable[[RunContext[Any]], str]


@dataclasses.dataclass
class LoopwatchCapability(AbstractCapability[Any]):
    """Places loopwatch warnings into every model request of a Pydantic AI agent."""

    client: LoopwatchClient
    session_id: str | SessionIdOf | None = None
    """A fixed id, a function of the run context, or None for the run's conversation."""
    _generated: str | None = dataclasses.field(default=None, init=False, repr=False)
    agent_id: str | None = None
    """Default: the agent's `name`."""
    stop_on_loop: StopOnLoop = False
    """At a warning of level 3 (stop advised): True raises `LoopStopAdvised` out of the
    agent's run before the model request, a callable is called with the warning
    instead; False (default): warnings only."""
    _stopper: LoopStopper = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._stopper = LoopStopper(self.stop_on_loop)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        try:
            return await self._placed(ctx, request_context)
        except LoopStopAdvised:  # the caller opted in to stopping the run
            raise
        except Exception as exc:  # fail-open: loopwatch never breaks the run
            log.warning("LoopwatchCapability: %s; request left unchanged", type(exc).__name__)
            return request_context

    async def _placed(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = list(request_context.messages)
        agent_name = getattr(ctx.agent, "name", None) if ctx.agent is not None else None
        session = self._session_of(ctx)
        tracker = await self.client.tracker(
            session, "anthropic", agent_id=self.agent_id or agent_name
        )
        system = "\n".join(p.content for m in messages for p in _system_parts(m)) or None
        warnings = await tracker.warnings([anthropic_message(m) for m in messages], system=system)
        self._stopper.after_wait(session, tracker.last_wait)
        if not warnings:
            return request_context
        for index in sorted(warnings):
            # A response's warnings go to the request after it (that user turn).
            target = index if isinstance(messages[index], ModelRequest) else index + 1
            parts = [UserPromptPart(content=warning_text(text)) for text in warnings[index]]
            if target == len(messages):
                messages.append(ModelRequest(parts=parts))
            else:
                request = messages[target]
                assert isinstance(request, ModelRequest)
                messages[target] = dataclasses.replace(request, parts=[*request.parts, *parts])
        return dataclasses.replace(request_context, messages=messages)

    def _session_of(self, ctx: RunContext[Any]) -> str:
        if isinstance(self.session_id, str):
            return self.session_id
        if self.session_id is not None:
            return self.session_id(ctx)
        session = ctx.conversation_id or ctx.run_id
        if session is None:
            if self._generated is None:
                self._generated = f"pai-{uuid.uuid4().hex}"
                log.warning(
                    "LoopwatchCapability: the run has no id and no session_id was given; using %s",
                    self._generated,
                )
            session = self._generated
        return session


def anthropic_message(message: ModelMessage) -> dict[str, Any]:
    """A Pydantic AI message as an Anthropic message (only what detection reads)."""
    blocks: list[dict[str, Any]] = []
    if isinstance(message, ModelResponse):
        for part in message.parts:
            if isinstance(part, TextPart):
                blocks.append({"type": "text", "text": part.content})
            elif isinstance(part, ToolCallPart):
                call = {"id": part.tool_call_id, "name": part.tool_name}
                blocks.append({"type": "tool_use", **call, "input": part.args_as_dict()})
        return {"role": "assistant", "content": blocks}
    for item in message.parts:
        if isinstance(item, ToolReturnPart):
            result = {"tool_use_id": item.tool_call_id, "content": item.model_response_str()}
            blocks.append({"type": "tool_result", **result})
        elif isinstance(item, RetryPromptPart) and item.tool_name is not None:
            retry = {"tool_use_id": item.tool_call_id, "content": item.model_response()}
            blocks.append({"type": "tool_result", **retry, "is_error": True})
        elif isinstance(item, UserPromptPart | RetryPromptPart):
            text = item.content if isinstance(item.content, str) else str(item.content)
            blocks.append({"type": "text", "text": text})
    # tool results first, as in an Anthropic user turn
    blocks.sort(key=lambda block: block["type"] != "tool_result")
    return {"role": "user", "content": blocks}


def _system_parts(message: ModelMessage) -> list[SystemPromptPart]:
    if isinstance(message, ModelRequest):
        return [p for p in message.parts if isinstance(p, SystemPromptPart)]
    return []
