"""The structural rules of the two prompt formats, as checks for tests.

OpenAI Chat: the `tool` messages answering an assistant message's `tool_calls` follow it
directly, one per call id; a `tool` message appears nowhere else.

Anthropic Messages: roles are `user` and `assistant` only (system is top-level), they
alternate starting with `user`; in a user turn the `tool_result` blocks come first; every
`tool_use` is answered by a `tool_result` in the very next user turn, and a `tool_result`
answers only a `tool_use` of the turn just before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any


def check_openai(messages: Sequence[dict[str, Any]]) -> None:
    """Raise AssertionError naming the first broken rule."""
    index = 0
    while index < len(messages):
        message = messages[index]
        role = message.get("role")
        assert role in ("system", "user", "assistant", "tool"), f"{index}: role {role!r}"
        assert role != "tool", f"{index}: a tool message that answers no preceding tool call"
        index += 1
        if role == "assistant" and message.get("tool_calls"):
            wanted = Counter(call["id"] for call in message["tool_calls"])
            answered: Counter[str] = Counter()
            while index < len(messages) and messages[index].get("role") == "tool":
                answered[messages[index]["tool_call_id"]] += 1
                index += 1
            assert answered == wanted, (
                f"tool calls {sorted(wanted)} answered by {sorted(answered)} "
                f"right after message {index - sum(answered.values()) - 1}"
            )


def check_anthropic(messages: Sequence[dict[str, Any]]) -> None:
    """Raise AssertionError naming the first broken rule."""
    assert messages, "no messages"
    previous_tool_uses: Counter[str] = Counter()
    for index, message in enumerate(messages):
        role = message.get("role")
        assert role in ("user", "assistant"), f"{index}: role {role!r} (system is top-level)"
        assert role == ("user" if index % 2 == 0 else "assistant"), f"{index}: roles must alternate"
        blocks = _blocks(message)
        if role == "assistant":
            assert not any(b.get("type") == "tool_result" for b in blocks), f"{index}"
            previous_tool_uses = Counter(b["id"] for b in blocks if b.get("type") == "tool_use")
            continue
        kinds = [b.get("type") for b in blocks]
        first_other = next((i for i, k in enumerate(kinds) if k != "tool_result"), len(kinds))
        assert "tool_result" not in kinds[first_other:], f"{index}: tool_result after other content"
        answered = Counter(b["tool_use_id"] for b in blocks if b.get("type") == "tool_result")
        assert answered == previous_tool_uses, (
            f"{index}: tool_use {sorted(previous_tool_uses)} answered by {sorted(answered)}"
        )
        assert all(b.get("type") != "text" or b.get("text") for b in blocks), f"{index}: empty text"
        previous_tool_uses = Counter()
    assert not previous_tool_uses, "the last assistant tool_use is unanswered"


def anthropic_blocks(messages: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The prompt as a flat sequence of (role, block): what a prefix cache sees."""
    return [(m["role"], block) for m in messages for block in _blocks(m)]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])
