"""Warnings into a model prompt (docs/contract.md §6): OpenAI Chat, Anthropic Messages and
OpenAI Responses API input items.

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

Responses API items: a warning is a `system` message item right after its item. A
`function_call` and its `function_call_output` are kept together (and a `reasoning` item
never gets anything between it and the item after it, since a warning is never anchored
to a `reasoning` item): a warning of a `function_call` goes past the step's following
calls and then their outputs, one of a `function_call_output` past the following outputs.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

MARKER = "[loopwatch] "
"""Starts every placed warning, so a model (and a human reading logs) knows its source."""

Message = Mapping[str, Any]
WarningsByMessage = Mapping[int, Sequence[str]]


ModelFamily = Literal["openai", "anthropic", "gemini", "bedrock"]
"""Where a provider lets a warning go. `openai` (Chat Completions and Responses): a
system message right after its message. The others (Anthropic Messages, Gemini, Bedrock
Converse) take a system prompt only in front of the conversation, so a warning is user
content instead: in the user turn that carries the tool results (after them), or in a
trailing user turn; never a second system message."""

_FAMILY_HINTS: tuple[tuple[str, ModelFamily], ...] = (
    ("anthropic", "anthropic"),
    ("claude", "anthropic"),
    ("bedrock", "bedrock"),
    ("converse", "bedrock"),
    ("gemini", "gemini"),
    ("google", "gemini"),
    ("vertex", "gemini"),
)


def model_family(*hints: str | None) -> ModelFamily:
    """The family of the model a framework is calling, from what it says of it: a
    provider name (`anthropic`, `google_genai`, `amazon_bedrock`, ...), a model name
    (`claude-sonnet-4-5`, `gemini-2.5-pro`, `bedrock/...`) or a class name
    (`ChatAnthropic`, `AnthropicModel`). The first hint that names a family decides
    (a provider before a model name: Claude on Bedrock is `bedrock`); none: `openai`
    (OpenAI, Azure, and servers compatible with its Chat API)."""
    for hint in hints:
        lowered = (hint or "").lower()
        for needle, family in _FAMILY_HINTS:
            if needle in lowered:
                return family
    return "openai"


def system_messages_allowed(family: ModelFamily) -> bool:
    """Whether a warning may be a system message mid-conversation (OpenAI only)."""
    return family == "openai"


def warning_text(message: str) -> str:
    """The text of one placed warning."""
    return message if message.startswith(MARKER) else MARKER + message


def place_openai(messages: Sequence[Message], warnings: WarningsByMessage) -> list[dict[str, Any]]:
    """The prompt for OpenAI Chat: `messages` with each warning as a system message."""
    return _insert(messages, openai_points(messages, warnings), _chat_warning)


def place_responses(
    items: Sequence[Message], warnings: WarningsByMessage, *, role: str = "system"
) -> list[dict[str, Any]]:
    """The input for the OpenAI Responses API: each warning as a system message item
    (`role="user"`: a user message item, for a runtime that converts the items for a
    provider without mid-conversation system messages)."""
    return _insert(
        items,
        responses_points(items, warnings),
        lambda text: {"type": "message", "role": role, "content": text},
    )


def openai_points(messages: Sequence[Message], warnings: WarningsByMessage) -> dict[int, list[str]]:
    """Where warnings go in an OpenAI Chat history: index to insert after -> placed texts.

    For adapters that insert their framework's own message objects."""
    return _points(messages, warnings, _openai_point)


def responses_points(items: Sequence[Message], warnings: WarningsByMessage) -> dict[int, list[str]]:
    """Where warnings go among Responses API input items: index to insert after -> texts."""
    return _points(items, warnings, _responses_point)


def _points(
    messages: Sequence[Message],
    warnings: WarningsByMessage,
    point_of: Callable[[Sequence[Message], int], int],
) -> dict[int, list[str]]:
    _check_indexes(warnings, len(messages))
    pending: dict[int, list[str]] = {}
    for index in sorted(warnings):
        pending.setdefault(point_of(messages, index), []).extend(
            warning_text(t) for t in warnings[index]
        )
    return pending


def _insert(
    messages: Sequence[Message],
    points: Mapping[int, Sequence[str]],
    make: Callable[[str], dict[str, Any]],
) -> list[dict[str, Any]]:
    prompt: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        prompt.append(copy.deepcopy(dict(message)))
        prompt.extend(make(text) for text in points.get(index, ()))
    return prompt


def _chat_warning(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def _openai_point(messages: Sequence[Message], index: int) -> int:
    """The index of the message after which a warning of `messages[index]` goes."""
    message = messages[index]
    if message.get("role") == "tool" or (
        message.get("role") == "assistant" and message.get("tool_calls")
    ):
        while index + 1 < len(messages) and messages[index + 1].get("role") == "tool":
            index += 1
    return index


def _responses_point(items: Sequence[Message], index: int) -> int:
    """After a call: past the step's further calls, then past their outputs."""
    kinds = ("function_call", "function_call_output")
    kind = items[index].get("type")
    if kind not in kinds:
        return index
    for skipped in kinds[kinds.index(kind) :]:
        while index + 1 < len(items) and items[index + 1].get("type") == skipped:
            index += 1
    return index


@dataclass(frozen=True)
class _TurnShape:
    """How one API spells a conversation of user and assistant turns with content blocks."""

    content: str
    user: str
    is_result: Callable[[Any], bool]
    text: Callable[[str], dict[str, Any]]


_ANTHROPIC = _TurnShape(
    "content",
    "user",
    lambda block: isinstance(block, Mapping) and block.get("type") == "tool_result",
    lambda text: {"type": "text", "text": text},
)
_GEMINI = _TurnShape(
    "parts",
    "user",
    lambda part: isinstance(part, Mapping) and "functionResponse" in part,
    lambda text: {"text": text},
)
_BEDROCK = _TurnShape(
    "content",
    "user",
    lambda block: isinstance(block, Mapping) and "toolResult" in block,
    lambda text: {"text": text},
)


def place_anthropic(
    messages: Sequence[Message], warnings: WarningsByMessage
) -> list[dict[str, Any]]:
    """The prompt for Anthropic Messages: each warning as a text block in a user turn."""
    return _place_in_user_turns(messages, warnings, _ANTHROPIC)


def place_gemini(contents: Sequence[Message], warnings: WarningsByMessage) -> list[dict[str, Any]]:
    """The `contents` for Gemini (`role` `user` / `model`, `parts`): each warning as a text
    part in a user turn, after its `functionResponse` parts (as Anthropic's)."""
    return _place_in_user_turns(contents, warnings, _GEMINI)


def place_bedrock(messages: Sequence[Message], warnings: WarningsByMessage) -> list[dict[str, Any]]:
    """The `messages` for Bedrock Converse: each warning as a `{"text": ...}` block in a
    user turn, after its `toolResult` blocks (as Anthropic's)."""
    return _place_in_user_turns(messages, warnings, _BEDROCK)


def _place_in_user_turns(
    messages: Sequence[Message], warnings: WarningsByMessage, shape: _TurnShape
) -> list[dict[str, Any]]:
    _check_indexes(warnings, len(messages))
    leading: dict[int, list[str]] = {}  # user message index -> after its tool results
    trailing: dict[int, list[str]] = {}  # user message index -> at its end
    for index in sorted(warnings):
        texts = [warning_text(t) for t in warnings[index]]
        if messages[index].get("role") == shape.user:
            trailing.setdefault(index, []).extend(texts)
        else:
            # The next user turn: the one after it (roles alternate) or a trailing one.
            leading.setdefault(index + 1, []).extend(texts)
    prompt: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if index in leading or index in trailing:
            before, after = leading.get(index, []), trailing.get(index, [])
            prompt.append(_with_warnings(message, before, after, shape))
        else:
            prompt.append(copy.deepcopy(dict(message)))
    if len(messages) in leading:
        texts = leading[len(messages)]
        prompt.append({"role": shape.user, shape.content: [shape.text(t) for t in texts]})
    return prompt


def _with_warnings(
    message: Message, leading: list[str], trailing: list[str], shape: _TurnShape
) -> dict[str, Any]:
    """A copy of a user message with warning blocks after its tool results and at its end."""
    if message.get("role") != shape.user:
        raise ValueError("the history must alternate user and assistant messages")
    content = message.get(shape.content)
    blocks: list[Any] = (
        [shape.text(content)] if isinstance(content, str) else copy.deepcopy(list(content or []))
    )
    results = 0
    while results < len(blocks) and shape.is_result(blocks[results]):
        results += 1
    rebuilt = [
        *blocks[:results],
        *(shape.text(t) for t in leading),
        *blocks[results:],
        *(shape.text(t) for t in trailing),
    ]
    copied = copy.deepcopy({key: value for key, value in message.items() if key != shape.content})
    copied[shape.content] = rebuilt
    return copied


def _check_indexes(warnings: WarningsByMessage, length: int) -> None:
    for index in warnings:
        if not 0 <= index < length:
            raise IndexError(f"warning for message {index}, but the history has {length}")
