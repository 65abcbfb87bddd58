"""A model API's message history as loopwatch events (docs/contract.md §6), pure.

`history_events(messages, "openai" | "anthropic" | "responses" | "gemini" | "bedrock")`
turns a whole history
into the events a runtime publishes for it, each with the index of the message it comes
from. `HistoryReader` does the same piece by piece (it remembers the tool names of the
calls a later result answers), which is what `HistoryTracker` needs; `as_agent_events`
gives the events their session, `seq` and time, e.g. to scan a recorded transcript.

Messages that are placed warnings (text starting with `[loopwatch] `) are skipped: a
history that was fed back with its warnings must not report them as conversation.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from loopwatch.models import EVENT_ADAPTER, AgentEvent
from loopwatch.streams.client import message_parts as parts
from loopwatch.streams.client.encoding import Call

Format = Literal["openai", "anthropic", "responses", "gemini", "bedrock"]
FORMATS: tuple[Format, ...] = ("openai", "anthropic", "responses", "gemini", "bedrock")
"""OpenAI Chat messages, Anthropic Messages, OpenAI Responses input items, Gemini
`contents` (REST field names) and Bedrock Converse `messages`. Gemini and Bedrock are
read as the Anthropic messages they correspond to (`tool_result` blocks with `is_error`
for a Bedrock `toolResult` with `status: "error"` or a Gemini `functionResponse` whose
`response` has an `error`): a `tool_error` function gets those blocks."""

EventKind = Literal["user_message", "system_message", "assistant_message", "tool_result"]

ToolError = Callable[[Mapping[str, Any]], str | None]
"""Given a tool result (Chat `tool` message, Anthropic `tool_result` block or Responses
`function_call_output` item), its error text, or None when it succeeded."""

_NAMES_REMEMBERED = 1024  # call id -> tool name, for results that come later


@dataclass(frozen=True)
class HistoryEvent:
    """One event of a history, before it gets a session, `seq` and time."""

    kind: EventKind
    message_index: int
    """Index of the history message it comes from (a warning is placed after it)."""
    text: str | None = None
    calls: tuple[Call, ...] = ()
    call_id: str | None = None
    tool_name: str | None = None
    result: Any = None
    error: str | None = None

    def body(self) -> dict[str, Any]:
        """The event's own fields on the wire (docs/contract.md §2)."""
        if self.kind == "assistant_message":
            calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.calls]
            return {"text": self.text, "tool_calls": calls}
        if self.kind == "tool_result":
            return {
                "call_id": self.call_id,
                "tool_name": self.tool_name,
                "result": self.result,
                "error": self.error,
            }
        return {"text": self.text}


def anthropic_tool_error(block: Mapping[str, Any]) -> str | None:
    """An Anthropic `tool_result` block with `is_error: true` failed with its text."""
    return parts.plain_text(block.get("content")) or "" if block.get("is_error") else None


def no_tool_error(_result: Mapping[str, Any]) -> str | None:
    """Chat and Responses results carry no error flag: every result counts as a success."""
    return None


class HistoryReader:
    """Turns consecutive parts of one history into events; remembers call names."""

    def __init__(self, fmt: Format, tool_error: ToolError | None = None) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown history format {fmt!r}; expected one of {FORMATS}")
        self.format: Format = fmt
        self._tool_error = tool_error or (
            anthropic_tool_error if fmt in ("anthropic", "gemini", "bedrock") else no_tool_error
        )
        self._names: OrderedDict[str, str] = OrderedDict()
        self._gemini_counts: dict[tuple[str, str], int] = {}  # (kind, name) -> count

    def events(self, messages: Sequence[Mapping[str, Any]], start: int = 0) -> list[HistoryEvent]:
        """The events of `messages[start:]`; message indexes count from 0 in `messages`."""
        if self.format == "gemini":
            messages = [*messages[:start], *map(self._gemini_message, messages[start:])]
        elif self.format == "bedrock":
            messages = [*messages[:start], *map(parts.bedrock_message, messages[start:])]
        read = {"openai": self._chat, "responses": self._responses}
        return read.get(self.format, self._anthropic)(messages, start)

    def system_prompt(self, text: str) -> HistoryEvent:
        """Anthropic's top-level system prompt, as an event placed before everything."""
        return HistoryEvent("system_message", -1, text=text)

    # -- OpenAI Chat ---------------------------------------------------------------------

    def _chat(self, messages: Sequence[Mapping[str, Any]], start: int) -> list[HistoryEvent]:
        events = []
        for index in range(start, len(messages)):
            message = messages[index]
            role = message.get("role")
            text = parts.plain_text(message.get("content"))
            if role in ("system", "developer", "user"):
                if not parts.is_warning(text):
                    kind: EventKind = "user_message" if role == "user" else "system_message"
                    events.append(HistoryEvent(kind, index, text=text))
            elif role == "assistant":
                calls = [
                    Call(c.get("id", ""), c["function"]["name"], parts.arguments(c["function"]))
                    for c in message.get("tool_calls") or ()
                ]
                events.append(self._assistant(index, text, calls))
            elif role == "tool":
                events.append(self._result(index, message.get("tool_call_id", ""), message))
        return events

    # -- Anthropic Messages --------------------------------------------------------------

    def _anthropic(self, messages: Sequence[Mapping[str, Any]], start: int) -> list[HistoryEvent]:
        events = []
        for index in range(start, len(messages)):
            message = messages[index]
            blocks = parts.blocks(message.get("content"))
            if message.get("role") == "assistant":
                calls = [
                    Call(b.get("id", ""), b.get("name", ""), b.get("input", {}))
                    for b in blocks
                    if b.get("type") == "tool_use"
                ]
                texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
                events.append(self._assistant(index, "\n".join(texts) or None, calls))
                continue
            others = []
            for block in blocks:
                if block.get("type") == "tool_result":
                    events.append(self._result(index, block.get("tool_use_id", ""), block))
                elif not (block.get("type") == "text" and parts.is_warning(block.get("text"))):
                    others.append(block)
            if others or not blocks:
                text = "\n".join(b.get("text", "") for b in others if b.get("type") == "text")
                events.append(HistoryEvent("user_message", index, text=text or None))
        return events

    # -- Gemini contents, Bedrock Converse messages: as Anthropic messages ---------------

    def _gemini_message(self, content: Mapping[str, Any]) -> Mapping[str, Any]:
        blocks: list[dict[str, Any]] = []
        for part in content.get("parts") or ():
            if "text" in part:
                blocks.append({"type": "text", "text": part["text"]})
            elif "functionCall" in part:
                call = part["functionCall"]
                call_id = call.get("id") or self._gemini_id("call", call.get("name", ""))
                use = {"type": "tool_use", "id": call_id, "name": call.get("name", "")}
                blocks.append({**use, "input": call.get("args") or {}})
            elif "functionResponse" in part:
                answer = part["functionResponse"]
                name = answer.get("name", "")
                call_id = answer.get("id") or self._gemini_id("result", name)
                response = answer.get("response")
                error = response.get("error") if isinstance(response, Mapping) else None
                block = {"type": "tool_result", "tool_use_id": call_id, "name": name}
                if error is not None:
                    text = error if isinstance(error, str) else json.dumps(error, default=str)
                    blocks.append({**block, "content": text, "is_error": True})
                else:
                    blocks.append({**block, "content": response})
        role = "assistant" if content.get("role") == "model" else "user"
        return {"role": role, "content": blocks}

    def _gemini_id(self, kind: str, name: str) -> str:
        """Gemini calls without ids: the n-th result of a tool answers its n-th call."""
        count = self._gemini_counts.get((kind, name), 0)
        self._gemini_counts[(kind, name)] = count + 1
        return f"{name}#{count}"

    # -- OpenAI Responses API input items ------------------------------------------------

    def _responses(self, items: Sequence[Mapping[str, Any]], start: int) -> list[HistoryEvent]:
        events = []
        turn_texts: list[str] = []
        turn_calls: list[Call] = []
        for index in range(start, len(items)):
            item = items[index]
            kind = item.get("type", "message")
            role = item.get("role")
            if kind == "function_call":
                arguments = parts.arguments(item)
                turn_calls.append(Call(item.get("call_id", ""), item.get("name", ""), arguments))
            elif kind == "message" and role == "assistant":
                turn_texts.append(parts.plain_text(item.get("content")) or "")
            elif kind == "function_call_output":
                events.append(self._result(index, item.get("call_id", ""), item))
            elif kind == "message" and role in ("system", "developer", "user"):
                text = parts.plain_text(item.get("content"))
                if not parts.is_warning(text):
                    event_kind: EventKind = "user_message" if role == "user" else "system_message"
                    events.append(HistoryEvent(event_kind, index, text=text))
            elif kind not in parts.MODEL_OUTPUT_ITEMS:
                continue  # built-in tool calls and the like: not part of the seed contract
            # One model turn is one assistant event, anchored to the turn's last item.
            following = items[index + 1] if index + 1 < len(items) else None
            assistant = kind == "message" and role == "assistant"
            in_turn = kind in parts.MODEL_OUTPUT_ITEMS or assistant
            if in_turn and (following is None or not parts.is_model_output(following)):
                text = "\n".join(t for t in turn_texts if t) or None
                events.append(self._assistant(index, text, turn_calls))
                turn_texts, turn_calls = [], []
        return events

    # -- shared --------------------------------------------------------------------------

    def _assistant(self, index: int, text: str | None, calls: Sequence[Call]) -> HistoryEvent:
        for call in calls:
            self._names[call.id] = call.name
            while len(self._names) > _NAMES_REMEMBERED:
                self._names.popitem(last=False)
        return HistoryEvent("assistant_message", index, text=text, calls=tuple(calls))

    def _result(self, index: int, call_id: str, message: Mapping[str, Any]) -> HistoryEvent:
        content = message.get("output") if self.format == "responses" else message.get("content")
        return HistoryEvent(
            "tool_result",
            index,
            call_id=call_id,
            tool_name=self._names.get(call_id, message.get("name") or "unknown"),
            result=parts.result_value(content),
            error=self._tool_error(message),
        )


def history_events(
    messages: Sequence[Mapping[str, Any]], fmt: Format, tool_error: ToolError | None = None
) -> list[HistoryEvent]:
    """The events of a whole history, in order (pure)."""
    return HistoryReader(fmt, tool_error).events(messages)


def as_agent_events(
    events: Iterable[HistoryEvent],
    *,
    session_id: str,
    started: datetime,
    agent_id: str | None = None,
    first_seq: int = 0,
) -> list[AgentEvent]:
    """Validated wire events: `seq` from `first_seq` on, one millisecond apart from
    `started` (a recorded transcript has no times of its own)."""
    out = []
    for offset, event in enumerate(events):
        record = {
            "type": event.kind,
            "session_id": session_id,
            "seq": first_seq + offset,
            "ts": started + timedelta(milliseconds=offset),
            "agent_id": agent_id,
            **event.body(),
        }
        out.append(EVENT_ADAPTER.validate_python(record))
    return out
