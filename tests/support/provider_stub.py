"""A local HTTP stand-in for a model provider's API: records each request, plays a script.

    async with ProviderStub(looping_search_script()) as stub:
        model = ChatOpenAI(base_url=stub.openai_base_url, api_key="test", model="gpt-4o")
        ...
    stub.requests  # the JSON bodies the provider would have received, in order

One server speaks the three APIs the integrations call: OpenAI Chat Completions
(`POST /v1/chat/completions`), the OpenAI Responses API (`POST /v1/responses`) and
Anthropic Messages (`POST /v1/messages`), each answering in its own format. The script
is a list of turns, played one per request whatever the API: a tool call (name,
arguments) or a final text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class ToolTurn:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class TextTurn:
    text: str


Turn = ToolTurn | TextTurn


@dataclass
class Recorded:
    """One request: the API's path and its JSON body."""

    path: str
    body: dict[str, Any]


@dataclass
class ProviderStub:
    """The server (127.0.0.1, a free port) and what it was sent."""

    script: list[Turn]
    requests: list[Recorded] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    port: int = 0

    async def __aenter__(self) -> ProviderStub:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/messages", self._messages)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        """The Anthropic clients' base URL (they append /v1/messages)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """The OpenAI clients' base URL (they append /chat/completions, /responses)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == path]

    async def _turn(self, request: web.Request) -> tuple[int, Turn]:
        body = await request.json()
        assert not body.get("stream") or request.path == "/v1/messages", "streams Messages only"
        self.requests.append(Recorded(request.path, body))
        index = len(self.requests) - 1
        assert index < len(self.script), f"request {index} beyond the script"
        return index, self.script[index]

    async def _chat(self, request: web.Request) -> web.Response:
        index, turn = await self._turn(request)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(turn, ToolTurn):
            call = {"name": turn.name, "arguments": json.dumps(turn.arguments)}
            message["tool_calls"] = [{"id": f"call_{index}", "type": "function", "function": call}]
            finish = "tool_calls"
        else:
            message["content"] = turn.text
            finish = "stop"
        return web.json_response(
            {
                "id": f"chatcmpl-{index}",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    async def _responses(self, request: web.Request) -> web.Response:
        index, turn = await self._turn(request)
        if isinstance(turn, ToolTurn):
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{index}",
                "call_id": f"call_{index}",
                "name": turn.name,
                "arguments": json.dumps(turn.arguments),
                "status": "completed",
            }
        else:
            text = {"type": "output_text", "text": turn.text, "annotations": []}
            item = {
                "type": "message",
                "id": f"msg_{index}",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        usage = {
            "input_tokens": 1,
            "output_tokens": 1,
            "total_tokens": 2,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        return web.json_response(
            {
                "id": f"resp_{index}",
                "object": "response",
                "created_at": 0,
                "model": "gpt-4o",
                "status": "completed",
                "output": [item],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": usage,
            }
        )

    async def _messages(self, request: web.Request) -> web.Response:
        index, turn = await self._turn(request)
        if isinstance(turn, ToolTurn):
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{index}",
                    "name": turn.name,
                    "input": turn.arguments,
                }
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": turn.text}]
            stop = "end_turn"
        message = {
            "id": f"msg_{index}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        if not self.requests[-1].body.get("stream"):
            return web.json_response(message)
        return await _anthropic_stream(request, message)


async def _anthropic_stream(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
    """The same message as Anthropic's server-sent events (Pydantic AI streams)."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}
    ]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [
            {"type": "content_block_start", "index": index, "content_block": start},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events += [
        {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for event in events:
        await response.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
    await response.write_eof()
    return response
