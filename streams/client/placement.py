"""Warnings into a model prompt (docs/contract.md §6), for OpenAI Chat and Anthropic Messages.

Pure functions: no I/O, and the caller's history is never modified (every message that
gets a warning is rebuilt; the others are deep-copied).

`warnings` maps the index of a history message to the warning texts of the events that
message produced, in order. Placement depends only on (history, warnings), so building
the prompt again gives the same result, and because each warning sits at or after its
own message, a warning of a later message only ever adds to the end of the prompt.

OpenAI Chat: a warning is a `system` message (`[loopwatch] ...`) right after its message.
The API requires the `tool` messages answering an assistant's `tool_calls` to follow it
directly, so a warning whose message is an assistant message with tool calls, or a
`tool` message, goes after the whole run of `tool` messages that follows; several
warnings at one point keep the order of their messages.

Anthropic Messages: there are no system messages mid-conversation, so a warning is a
text block (`[loopwatch] ...`) inside a user turn, keeping roles alternating and
`tool_result` blocks first:
* a warning of a user message goes at the end of that message's content;
* a warning of an assistant message goes into the next user message, right after its
  leading `tool_result` blocks (the results that answer that assistant message);
* when the assistant message is the last one, a trailing user turn carries it. When the
  real user message arrives later, the warning keeps its place at that turn's start, so
  the blocks of the earlier prompt stay a prefix of the new one.

"Same prefix" holds between valid prompts: in both APIs every tool call must be answered
before the next model call, and these rules rely on it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

MARKER = "[loopwatch] "
"""Starts every placed warning, so a model (and a human reading logs) knows its source."""

Message = Mapping[str, Any]
WarningsByMessage = Mapping[int, Sequence[str]]


def warning_text(message: str) -> str:
    """The text of one placed warning."""
    return message if message.startswith(MARKER) else MARKER + message


def place_openai(messages: Sequence[Message], warnings: WarningsByMessage) -> list[dict[str, Any]]:
    """The prompt for OpenAI Chat: `messages` with each warning as a system message."""
    _check_indexes(warnings, len(messages))
    pending: dict[int, list[str]] = {}
    for index in sorted(warnings):
        point = _openai_point(messages, index)
        pending.setdefault(point, []).extend(warning_text(t) for t in warnings[index])
    prompt: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        prompt.append(copy.deepcopy(dict(message)))
        for text in pending.get(index, ()):
            prompt.append({"role": "system", "content": text})
    return prompt


def _openai_point(messages: Sequence[Message], index: int) -> int:
    """The index of the message after which a warning of `messages[index]` goes."""
    message = messages[index]
    if message.get("role") == "tool" or (
        message.get("role") == "assistant" and message.get("tool_calls")
    ):
        while index + 1 < len(messages) and messages[index + 1].get("role") == "tool":
            index += 1
    return index


def place_anthropic(
    messages: Sequence[Message], warnings: WarningsByMessage
) -> list[dict[str, Any]]:
    """The prompt for Anthropic Messages: each warning as a text block in a user turn."""
    _check_indexes(warnings, len(messages))
    leading: dict[int, list[str]] = {}  # user message index -> after its tool results
    trailing: dict[int, list[str]] = {}  # user message index -> at its end
    for index in sorted(warnings):
        texts = [warning_text(t) for t in warnings[index]]
        if messages[index].get("role") == "user":
            trailing.setdefault(index, []).extend(texts)
        else:
            # The next user turn: the one after it (roles alternate) or a trailing one.
            leading.setdefault(index + 1, []).extend(texts)
    prompt: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if index in leading or index in trailing:
            prompt.append(_with_warnings(message, leading.get(index, []), trailing.get(index, [])))
        else:
            prompt.append(copy.deepcopy(dict(message)))
    if len(messages) in leading:
        prompt.append({"role": "user", "content": _text_blocks(leading[len(messages)])})
    return prompt


def _with_warnings(message: Message, leading: list[str], trailing: list[str]) -> dict[str, Any]:
    """A copy of a user message with warning blocks after its tool results and at its end."""
    if message.get("role") != "user":
        raise ValueError("an Anthropic history must alternate user and assistant messages")
    content = message.get("content")
    blocks: list[Any] = (
        [{"type": "text", "text": content}]
        if isinstance(content, str)
        else copy.deepcopy(list(content or []))
    )
    results = 0
    while results < len(blocks) and _is_tool_result(blocks[results]):
        results += 1
    rebuilt = [
        *blocks[:results],
        *_text_blocks(leading),
        *blocks[results:],
        *_text_blocks(trailing),
    ]
    copied = copy.deepcopy({key: value for key, value in message.items() if key != "content"})
    copied["content"] = rebuilt
    return copied


def _is_tool_result(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "tool_result"


def _text_blocks(texts: Sequence[str]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text} for text in texts]


def _check_indexes(warnings: WarningsByMessage, length: int) -> None:
    for index in warnings:
        if not 0 <= index < length:
            raise IndexError(f"warning for message {index}, but the history has {length}")
