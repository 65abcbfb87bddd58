"""Placement per model family: which family a model is, and the Gemini and Bedrock Converse
histories (read as events, warnings placed in user turns after the tool results)."""

from __future__ import annotations

from typing import Any

import pytest

from loopwatch.streams.client import (
    history_events,
    model_family,
    place_bedrock,
    place_gemini,
)
from loopwatch.streams.client.placement import system_messages_allowed


@pytest.mark.parametrize(
    ("hints", "family"),
    [
        (("openai", "gpt-4o", "ChatOpenAI"), "openai"),
        (("azure", "gpt-4o"), "openai"),
        (("anthropic", "claude-sonnet-4-5", "ChatAnthropic"), "anthropic"),
        ((None, "claude-3-5-haiku", "AnthropicModel"), "anthropic"),
        (("google_genai", "gemini-2.5-pro"), "gemini"),
        (("google_vertexai", "gemini-2.5-flash"), "gemini"),
        (("amazon_bedrock", "anthropic.claude-3-haiku"), "bedrock"),
        ((None, None, "ChatBedrockConverse"), "bedrock"),
        (("genericfakechatmodel", None, "GenericFakeChatModel"), "openai"),
        ((), "openai"),
    ],
)
def test_the_family_of_a_model(hints: tuple[str | None, ...], family: str) -> None:
    assert model_family(*hints) == family
    assert system_messages_allowed(model_family(*hints)) == (family == "openai")


def gemini_history() -> list[dict[str, Any]]:
    call = {"functionCall": {"name": "search", "args": {"q": "x"}}}
    answer = {"functionResponse": {"name": "search", "response": {"result": "none"}}}
    failed = {"functionResponse": {"name": "search", "response": {"error": "timeout"}}}
    return [
        {"role": "user", "parts": [{"text": "find x"}]},
        {"role": "model", "parts": [call]},
        {"role": "user", "parts": [answer]},
        {"role": "model", "parts": [{"text": "again"}, call]},
        {"role": "user", "parts": [failed]},
        {"role": "model", "parts": [{"text": "done"}]},
    ]


def test_a_gemini_history_as_events() -> None:
    events = history_events(gemini_history(), "gemini")
    assert [(e.kind, e.message_index) for e in events] == [
        ("user_message", 0),
        ("assistant_message", 1),
        ("tool_result", 2),
        ("assistant_message", 3),
        ("tool_result", 4),
        ("assistant_message", 5),
    ]
    # calls without ids: the n-th result of a tool answers its n-th call
    assert [c.id for c in events[1].calls + events[3].calls] == ["search#0", "search#1"]
    assert (events[2].call_id, events[2].tool_name, events[2].error) == ("search#0", "search", None)
    assert (events[4].call_id, events[4].error) == ("search#1", "timeout")


def test_gemini_warnings_go_into_user_turns_after_the_function_responses() -> None:
    history = gemini_history()
    prompt = place_gemini(history, {3: ["looping"], 4: ["failed again"], 5: ["last"]})
    assert prompt[4]["parts"] == [
        history[4]["parts"][0],
        {"text": "[loopwatch] looping"},  # the model turn's warning: after the responses
        {"text": "[loopwatch] failed again"},  # the user turn's own: at its end
    ]
    assert prompt[6] == {"role": "user", "parts": [{"text": "[loopwatch] last"}]}
    assert [m["role"] for m in prompt] == ["user", "model"] * 3 + ["user"]
    assert history == gemini_history()  # the caller's history is not modified


def bedrock_history() -> list[dict[str, Any]]:
    use = {"toolUse": {"toolUseId": "t1", "name": "edit_file", "input": {"path": "a"}}}
    result = {"toolUseId": "t1", "content": [{"text": "no match"}], "status": "error"}
    return [
        {"role": "user", "content": [{"text": "fix a"}]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [{"toolResult": result}]},
    ]


def test_a_bedrock_history_as_events_and_its_warnings() -> None:
    history = bedrock_history()
    events = history_events(history, "bedrock")
    assert [e.kind for e in events] == ["user_message", "assistant_message", "tool_result"]
    assert events[1].calls[0].name == "edit_file"
    assert (events[2].tool_name, events[2].error) == ("edit_file", "no match")
    prompt = place_bedrock(history, {1: ["stop"]})
    assert prompt[2]["content"][0] == history[2]["content"][0]  # the tool result first
    assert prompt[2]["content"][1] == {"text": "[loopwatch] stop"}
    assert all("type" not in block for m in prompt for block in m["content"])
