"""Which transcript format a conversation is in, from the marks only one format leaves.

A transcript read with the wrong format is not rejected by the reader: Chat `tool_calls`
read as Anthropic messages are no blocks, so the calls vanish and the scan finds no loop,
silently. Each format has fields or values no other one uses (a `tool` role, a
`tool_use` block, a `function_call` item, Gemini `parts`, a Bedrock `toolUse`); a
conversation whose marks all belong to one format is in that format. A conversation with
no mark holds only plain role/text messages, which every format reads alike (as its
tracker would, so the choice cannot change a verdict); marks of several formats are
reported, never guessed between.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loopwatch.streams.client.history import Format

PLAIN_TEXT_FORMAT: Format = "openai"
"""The format a conversation without any mark is read in (all formats agree on it)."""

_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
_RESPONSES_ITEMS = frozenset(
    {"function_call", "function_call_output", "message", "reasoning", "item_reference"}
)
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "refusal", "input_image"})
_BEDROCK_BLOCKS = frozenset({"toolUse", "toolResult", "reasoningContent"})
_GEMINI_PARTS = frozenset({"functionCall", "functionResponse"})


def formats_marked(messages: Sequence[Any], record: Mapping[str, Any]) -> set[Format]:
    """The formats whose marks the conversation carries (empty: plain text only)."""
    found: set[Format] = set()
    if isinstance(record.get("system"), str | list):
        found.add("anthropic")  # Anthropic's top-level system prompt; Chat has a message
    for message in messages:
        if isinstance(message, Mapping):
            found |= _message_marks(message)
    return found


def detect(messages: Sequence[Any], record: Mapping[str, Any]) -> Format | str:
    """The conversation's format, or (a str that is no format) why it cannot be told."""
    marked = formats_marked(messages, record)
    if not marked:
        return PLAIN_TEXT_FORMAT
    if len(marked) == 1:
        return next(iter(marked))
    return f"it has marks of several formats ({', '.join(sorted(marked))})"


def mismatch(fmt: Format, messages: Sequence[Any], record: Mapping[str, Any]) -> str | None:
    """Why the conversation is not in `fmt` (naming the format it is in), or None."""
    marked = formats_marked(messages, record)
    if not marked or fmt in marked:
        return None
    fits = " or ".join(f"--format {other}" for other in sorted(marked))
    return (
        f"this is not {article(fmt)} conversation but {' or '.join(map(article, sorted(marked)))}: "
        f"use {fits} (or --format auto)"
    )


def article(name: str) -> str:
    """`an openai`, `a gemini`."""
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _message_marks(message: Mapping[str, Any]) -> set[Format]:
    marks: set[Format] = set()
    role = message.get("role")
    if role == "tool" or "tool_calls" in message or "tool_call_id" in message:
        marks.add("openai")
    if role == "model" or "parts" in message:
        marks.add("gemini")
    if message.get("type") in _RESPONSES_ITEMS:
        marks.add("responses")
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in _ANTHROPIC_BLOCKS:
            marks.add("anthropic")
        elif kind in _RESPONSES_PARTS:
            marks.add("responses")
        elif kind is None and (_BEDROCK_BLOCKS & block.keys() or "text" in block):
            marks.add("bedrock")  # Bedrock blocks are keyed by kind, without a `type`
    for part in message.get("parts") or ():
        if isinstance(part, Mapping) and _GEMINI_PARTS & part.keys():
            marks.add("gemini")
    return marks
