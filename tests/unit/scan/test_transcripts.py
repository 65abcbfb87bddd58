"""Recorded transcripts (OpenAI Chat, Anthropic Messages, Responses items) read as events
by the runtime tracker's own conversion, for `loopwatch scan --format`."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from loopwatch.models import DetectionConfig
from loopwatch.streams.client.history import history_events
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.scan.transcripts import (
    TRANSCRIPT_EPOCH,
    Conversation,
    InvalidConversation,
    looks_like_transcript,
    read_conversations,
)


def chat_loop(repeats: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "find flights"}]
    for n in range(repeats):
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "search", "arguments": '{"q": "LHR"}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "no flights"})
    return messages


def anthropic_loop(repeats: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    for n in range(repeats):
        use = {"type": "tool_use", "id": f"t{n}", "name": "edit_file", "input": {"path": "a.py"}}
        messages.append({"role": "assistant", "content": [use]})
        result = {
            "type": "tool_result",
            "tool_use_id": f"t{n}",
            "content": "no match",
            "is_error": True,
        }
        messages.append({"role": "user", "content": [result]})
    return messages


def responses_loop(repeats: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "status?"}]
    for n in range(repeats):
        items.append(
            {"type": "function_call", "call_id": f"r{n}", "name": "status", "arguments": "{}"}
        )
        items.append({"type": "function_call_output", "call_id": f"r{n}", "output": "pending"})
    return items


def read(text: str, fmt: Any, name: str = "runs.jsonl") -> list[Conversation | InvalidConversation]:
    return list(read_conversations(io.BytesIO(text.encode()), fmt, name=name))


def rules(conversation: Conversation | InvalidConversation) -> list[str]:
    assert isinstance(conversation, Conversation)
    scanner = Scanner(DetectionConfig())
    return [v.warning.rule for v in scanner.run(conversation.events) if v.warning is not None]


@pytest.mark.parametrize(
    ("fmt", "build", "rule"),
    [
        ("openai", chat_loop, "repeated_result"),
        ("anthropic", anthropic_loop, "repeated_failed_mutation"),
        ("responses", responses_loop, "repeated_result"),
    ],
)
def test_each_format_yields_the_tracker_events_and_their_loop(
    fmt: Any, build: Any, rule: str
) -> None:
    lines = [json.dumps(build(3)), json.dumps({"session_id": "clean", "messages": build(1)})]
    if fmt == "responses":
        lines[1] = json.dumps({"session_id": "clean", "input": build(1)})
    first, second = read("\n".join(lines) + "\n", fmt)

    assert isinstance(first, Conversation)
    assert first.events[0].session_id == "runs.jsonl:1"
    assert [e.type for e in first.events] == [e.kind for e in history_events(build(3), fmt)]
    assert [e.seq for e in first.events] == list(range(len(first.events)))
    assert first.events[0].ts == TRANSCRIPT_EPOCH
    assert rule in rules(first)
    assert isinstance(second, Conversation)
    assert second.events[0].session_id == "clean"
    assert rules(second) == []


def test_a_whole_file_array_is_one_conversation() -> None:
    [conversation] = read(json.dumps(chat_loop(3), indent=2), "openai", name="/tmp/x/run.json")
    assert isinstance(conversation, Conversation)
    assert conversation.events[0].session_id == "run.json:1"
    assert "repeated_result" in rules(conversation)


def test_session_and_agent_ids_come_from_fields() -> None:
    record = {"conversation_id": 42, "agent_id": "support-bot", "messages": chat_loop(1)}
    [conversation] = read(json.dumps(record), "openai")
    assert isinstance(conversation, Conversation)
    assert {(e.session_id, e.agent_id) for e in conversation.events} == {("42", "support-bot")}


def test_anthropic_system_prompt_comes_first() -> None:
    record = {
        "id": "s",
        "system": [{"type": "text", "text": "be brief"}],
        "messages": anthropic_loop(1),
    }
    [conversation] = read(json.dumps(record), "anthropic")
    assert isinstance(conversation, Conversation)
    assert conversation.events[0].type == "system_message"


def test_invalid_lines_are_reported_with_their_number_and_the_rest_is_read() -> None:
    text = "\n".join(
        [
            "{broken",
            json.dumps({"messages": "nope"}),
            json.dumps([{"role": "assistant", "tool_calls": [{"id": "x"}]}]),
            "",
            json.dumps(chat_loop(1)),
        ]
    )
    outcomes = read(text, "openai")
    assert [type(o).__name__ for o in outcomes] == [
        "InvalidConversation",
        "InvalidConversation",
        "InvalidConversation",
        "Conversation",
    ]
    assert [o.args[1] for o in outcomes if isinstance(o, InvalidConversation)] == [1, 2, 3]
    assert "accepted formats: openai, anthropic, responses" in str(outcomes[1].args[0])
    assert "not valid JSON" in str(outcomes[0].args[0])
    last = outcomes[3]
    assert isinstance(last, Conversation) and last.line == 5


def test_a_transcript_line_is_recognised_for_the_hint() -> None:
    assert looks_like_transcript(json.dumps(chat_loop(1)).encode())
    assert looks_like_transcript(b'{"messages": []}')
    assert looks_like_transcript(b'{"role": "user", "content": "hi"}')
    assert not looks_like_transcript(b'{"type": "user_message"}')
    assert not looks_like_transcript(b"{broken")
