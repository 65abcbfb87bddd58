"""The structural rules of the three prompt formats, as checks for tests.

OpenAI Chat: the `tool` messages answering an assistant message's `tool_calls` follow it
directly, one per call id; a `tool` message appears nowhere else.

Anthropic Messages: roles are `user` and `assistant` only (system is top-level), they
alternate starting with `user`; in a user turn the `tool_result` blocks come first; every
`tool_use` is answered by a `tool_result` in the very next user turn, and a `tool_result`
answers only a `tool_use` of the turn just before.

OpenAI Responses input items: every `function_call` is answered by exactly one
`function_call_output` with its `call_id`, and an output answers only a call before it;
while calls are unanswered only further calls and their outputs may come (nothing of
ours between a call and its output); a `reasoning` item is followed directly by the
model output it belongs to (a `function_call` or an assistant `message`); message items
have the roles `system`, `developer`, `user` or `assistant`.
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


def check_responses(items: Sequence[dict[str, Any]]) -> None:
    """Raise AssertionError naming the first broken rule."""
    pending: Counter[str] = Counter()
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            pending[item["call_id"]] += 1
        elif kind == "function_call_output":
            assert pending[item["call_id"]] > 0, f"{index}: output answers no pending call"
            pending[item["call_id"]] -= 1
        else:
            assert not +pending, f"{index}: {kind} between calls {sorted(+pending)} and outputs"
        if kind == "message":
            assert item.get("role") in ("system", "developer", "user", "assistant"), f"{index}"
        if kind == "reasoning":
            following = items[index + 1] if index + 1 < len(items) else {}
            assert following.get("type") == "function_call" or (
                following.get("type", "message") == "message"
                and following.get("role") == "assistant"
            ), f"{index}: reasoning not followed by its output"
    assert not +pending, f"unanswered calls {sorted(+pending)}"


def anthropic_blocks(messages: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The prompt as a flat sequence of (role, block): what a prefix cache sees."""
    return [(m["role"], block) for m in messages for block in _blocks(m)]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])
