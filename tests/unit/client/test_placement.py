"""Prompt placement (docs/contract.md §6) for OpenAI Chat and Anthropic Messages: pure, no
broker."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from loopwatch.streams.client.placement import MARKER, place_anthropic, place_openai
from tests.support.prompt_rules import anthropic_blocks, check_anthropic, check_openai

# -- OpenAI Chat -------------------------------------------------------------------------


def oa_user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def oa_calls(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def oa_tool(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def oa_text(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def system_texts(prompt: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(i, m["content"]) for i, m in enumerate(prompt) if m["role"] == "system"]


def test_openai_warning_of_a_tool_result_follows_it() -> None:
    history = [oa_user("fix it"), oa_calls("a"), oa_tool("a"), oa_calls("b"), oa_tool("b")]
    prompt = place_openai(history, {4: ["stop repeating"]})
    check_openai(prompt)
    assert prompt[:5] == history
    assert prompt[5] == {"role": "system", "content": MARKER + "stop repeating"}
    assert len(prompt) == 6


def test_openai_warning_of_a_tool_call_message_goes_after_its_results() -> None:
    history = [oa_user("go"), oa_calls("a", "b", "c"), oa_tool("a"), oa_tool("b"), oa_tool("c")]
    prompt = place_openai(history, {1: ["batch again"]})
    check_openai(prompt)
    assert system_texts(prompt) == [(5, MARKER + "batch again")]


def test_openai_parallel_calls_with_warnings_on_the_call_and_on_a_result() -> None:
    history = [
        oa_user("go"),
        oa_calls("a", "b"),
        oa_tool("a"),
        oa_tool("b"),
        oa_text("done?"),
    ]
    # the result `a` and the assistant message both warn: both after the results block,
    # in message order
    prompt = place_openai(history, {2: ["from result a"], 1: ["from the batch"]})
    check_openai(prompt)
    assert system_texts(prompt) == [(4, MARKER + "from the batch"), (5, MARKER + "from result a")]
    assert prompt[6] == oa_text("done?")


def test_openai_several_warnings_in_one_history_and_one_at_the_end() -> None:
    history = [
        oa_user("go"),
        oa_calls("a"),
        oa_tool("a"),
        oa_calls("b"),
        oa_tool("b"),
        oa_user("again"),
        oa_text("I will stop"),
    ]
    warnings = {2: ["first"], 4: ["second", "third"], 5: ["at the boundary"], 6: ["final"]}
    prompt = place_openai(history, warnings)
    check_openai(prompt)
    assert [t for _, t in system_texts(prompt)] == [
        MARKER + m for m in ("first", "second", "third", "at the boundary", "final")
    ]
    # the final assistant message's verdict closes the prompt
    assert prompt[-2] == oa_text("I will stop")
    assert prompt[-1]["content"] == MARKER + "final"


def test_openai_rebuilding_gives_the_same_prefix_and_later_warnings_only_append() -> None:
    history = [oa_user("go"), oa_calls("a"), oa_tool("a")]
    first = place_openai(history, {2: ["one"]})
    assert place_openai(history, {2: ["one"]}) == first
    history += [oa_calls("b", "c"), oa_tool("b"), oa_tool("c")]
    second = place_openai(history, {2: ["one"], 3: ["two"], 5: ["three"]})
    check_openai(second)
    assert second[: len(first)] == first
    history += [oa_text("summary")]
    third = place_openai(history, {2: ["one"], 3: ["two"], 5: ["three"], 6: ["four"]})
    assert third[: len(second)] == second


def test_openai_history_is_never_modified() -> None:
    history = [oa_user("go"), oa_calls("a"), oa_tool("a")]
    before = copy.deepcopy(history)
    prompt = place_openai(history, {1: ["w"], 2: ["x"]})
    assert history == before
    prompt[1]["tool_calls"][0]["id"] = "changed"
    prompt[0]["content"] = "changed"
    assert history == before


def test_openai_a_warning_for_a_missing_message_is_an_error() -> None:
    with pytest.raises(IndexError):
        place_openai([oa_user("go")], {1: ["w"]})


# -- Anthropic Messages ------------------------------------------------------------------


def an_user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def an_uses(*ids: str, text: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "id": i, "name": "bash", "input": {"cmd": "make"}} for i in ids]
    return {"role": "assistant", "content": blocks}


def an_results(*ids: str, extra_text: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": i, "content": "boom", "is_error": True} for i in ids
    ]
    if extra_text:
        blocks.append({"type": "text", "text": extra_text})
    return {"role": "user", "content": blocks}


def an_text(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def warning_blocks(prompt: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    """(message index, block index, text) of every placed warning."""
    found = []
    for i, message in enumerate(prompt):
        content = message["content"]
        for j, block in enumerate(content if isinstance(content, list) else []):
            if block.get("type") == "text" and block["text"].startswith(MARKER):
                found.append((i, j, block["text"]))
    return found


def test_anthropic_warning_of_a_tool_result_joins_its_user_turn_after_the_results() -> None:
    history = [an_user("fix"), an_uses("a"), an_results("a"), an_uses("b"), an_results("b")]
    prompt = place_anthropic(history, {4: ["failed twice"]})
    check_anthropic(prompt)
    assert len(prompt) == len(history)
    assert prompt[4]["content"][0]["type"] == "tool_result"
    assert warning_blocks(prompt) == [(4, 1, MARKER + "failed twice")]


def test_anthropic_parallel_results_and_user_text_keep_tool_results_first() -> None:
    history = [an_user("go"), an_uses("a", "b", "c", text="three at once")]
    history.append(an_results("a", "b", "c", extra_text="also, hurry"))
    history.append(an_text("ok"))
    # the assistant's batch warning goes right after the results, before the user's text;
    # the results message's own warning at its end
    prompt = place_anthropic(history, {1: ["batch"], 2: ["result"]})
    check_anthropic(prompt)
    kinds = [b["type"] for b in prompt[2]["content"]]
    assert kinds == ["tool_result"] * 3 + ["text", "text", "text"]
    assert [b.get("text") for b in prompt[2]["content"][3:]] == [
        MARKER + "batch",
        "also, hurry",
        MARKER + "result",
    ]


def test_anthropic_final_assistant_verdict_goes_into_a_trailing_user_turn() -> None:
    history = [an_user("go"), an_uses("a"), an_results("a"), an_text("let me retry")]
    prompt = place_anthropic(history, {3: ["stop"]})
    check_anthropic(prompt)
    assert prompt[-1] == {"role": "user", "content": [{"type": "text", "text": MARKER + "stop"}]}
    # when the real user turn arrives, the warning keeps its place at that turn's start
    later = place_anthropic([*history, an_user("go on"), an_text("fine")], {3: ["stop"]})
    check_anthropic(later)
    assert anthropic_blocks(later)[: len(anthropic_blocks(prompt))] == anthropic_blocks(prompt)
    assert later[4]["content"] == [
        {"type": "text", "text": MARKER + "stop"},
        {"type": "text", "text": "go on"},
    ]


def test_anthropic_several_warnings_rebuild_and_append() -> None:
    history = [an_user("go"), an_uses("a"), an_results("a"), an_uses("b", "c")]
    history.append(an_results("b", "c"))
    warnings: dict[int, list[str]] = {2: ["one"], 3: ["two"], 4: ["three", "four"]}
    first = place_anthropic(history, warnings)
    check_anthropic(first)
    assert place_anthropic(history, warnings) == first
    assert [t for *_, t in warning_blocks(first)] == [
        MARKER + w for w in ("one", "two", "three", "four")
    ]
    history += [an_uses("d"), an_results("d")]
    second = place_anthropic(history, {**warnings, 6: ["five"]})
    check_anthropic(second)
    assert second[: len(first)] == first
    assert warning_blocks(second)[-1] == (6, 1, MARKER + "five")


def test_anthropic_warning_of_a_user_text_message_and_history_untouched() -> None:
    history = [an_user("same thing again"), an_text("ok")]
    before = copy.deepcopy(history)
    prompt = place_anthropic(history, {0: ["batch repeats"]})
    check_anthropic(prompt)
    assert prompt[0]["content"] == [
        {"type": "text", "text": "same thing again"},
        {"type": "text", "text": MARKER + "batch repeats"},
    ]
    prompt[1]["content"][0]["text"] = "changed"
    assert history == before


def test_the_validators_catch_what_the_apis_reject() -> None:
    # each is a structure the APIs reject; the checks above would be worthless otherwise
    with pytest.raises(AssertionError):
        check_openai([oa_user("go"), oa_calls("a"), {"role": "system", "content": "x"}])
    with pytest.raises(AssertionError):
        check_openai([oa_user("go"), oa_calls("a", "b"), oa_tool("a")])
    with pytest.raises(AssertionError):
        check_anthropic([an_user("go"), an_uses("a"), {"role": "user", "content": "no result"}])
    with pytest.raises(AssertionError):
        check_anthropic([an_user("go"), an_text("x"), an_text("y")])
    bad_order = an_results("a")
    bad_order["content"].insert(0, {"type": "text", "text": "first"})
    with pytest.raises(AssertionError):
        check_anthropic([an_user("go"), an_uses("a"), bad_order])
    with pytest.raises(AssertionError):
        check_anthropic([{"role": "system", "content": "x"}, an_user("go")])
