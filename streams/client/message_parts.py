"""Reading the parts of provider messages (text, call arguments, results, Bedrock's
blocks) for `streams.client.history`: pure helpers, no state."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from loopwatch.streams.client.placement import MARKER

MODEL_OUTPUT_ITEMS = frozenset({"reasoning", "function_call"})


def bedrock_message(message: Mapping[str, Any]) -> Mapping[str, Any]:
    blocks: list[dict[str, Any]] = []
    for block in message.get("content") or ():
        if "text" in block:
            blocks.append({"type": "text", "text": block["text"]})
        elif "toolUse" in block:
            use = block["toolUse"]
            call = {"type": "tool_use", "id": use.get("toolUseId", ""), "name": use.get("name")}
            blocks.append({**call, "input": use.get("input") or {}})
        elif "toolResult" in block:
            result = block["toolResult"]
            parts = [
                {"type": "text", "text": p["text"]}
                if "text" in p
                else {"type": "text", "text": json.dumps(p.get("json"), default=str)}
                for p in result.get("content") or ()
            ]
            converted = {"type": "tool_result", "tool_use_id": result.get("toolUseId", "")}
            error = result.get("status") == "error"
            blocks.append({**converted, "content": parts, "is_error": error})
    return {"role": message.get("role"), "content": blocks}


def is_model_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type", "message")
    return kind in MODEL_OUTPUT_ITEMS or (kind == "message" and item.get("role") == "assistant")


def is_warning(text: Any) -> bool:
    return isinstance(text, str) and text.startswith(MARKER)


def blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or () if isinstance(b, Mapping)]


def plain_text(content: Any) -> str | None:
    """The text of a message's content: a string, or the text parts of a part list."""
    if content is None or isinstance(content, str):
        return content
    texts = [
        b["text"] for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


def arguments(function: Mapping[str, Any]) -> Any:
    """Call arguments: Chat and Responses send them as a JSON string."""
    raw = function.get("arguments")
    if not isinstance(raw, str):
        return raw if raw is not None else {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # not JSON: fingerprinted as the string it is


def result_value(content: Any) -> Any:
    """A result's content as JSON: text parts joined, anything else as it is."""
    value = plain_text(content) if isinstance(content, list) else content
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.loads(json.dumps(value, default=str))  # plain JSON, whatever it was
