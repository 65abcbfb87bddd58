"""History → events (all three formats), Responses placement, and the history tracker
driven by the real detector in-process (the Kafka path is covered in tests/e2e)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from loopwatch.models import DetectionConfig, LoopVerdict, decode_event
from loopwatch.streams.client import (
    MARKER,
    HistoryTracker,
    as_agent_events,
    history_events,
    place_responses,
)
from loopwatch.streams.client.encoding import EventEncoder
from loopwatch.streams.client.history import Format
from loopwatch.streams.client.session import Session
from loopwatch.streams.client.stats import ClientStats
from loopwatch.streams.scan.scanner import Scanner
from tests.support.prompt_rules import check_anthropic, check_openai, check_responses

TS = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
Message = dict[str, Any]


def chat_step(n: int, error: bool = False) -> list[Message]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "edit_file"}}
    call["function"]["arguments"] = json.dumps({"path": "a.py", "old": "x"})
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": "no match" if error else "ok"},
    ]


def anthropic_step(n: int) -> list[Message]:
    use = {"type": "tool_use", "id": f"u{n}", "name": "edit_file", "input": {"path": "a.py"}}
    result = {"type": "tool_result", "tool_use_id": f"u{n}", "content": "no match"}
    return [
        {"role": "assistant", "content": [{"type": "text", "text": "again"}, use]},
        {"role": "user", "content": [{**result, "is_error": True}]},
    ]


def responses_step(n: int) -> list[Message]:
    return [
        {"type": "reasoning", "id": f"rs{n}", "summary": []},
        {"type": "function_call", "call_id": f"f{n}", "name": "search", "arguments": '{"q":1}'},
        {"type": "function_call_output", "call_id": f"f{n}", "output": "nothing found"},
    ]


HISTORIES: dict[Format, Callable[[int], list[Message]]] = {
    "openai": lambda n: (
        [{"role": "user", "content": "go"}] + [m for i in range(n) for m in chat_step(i)]
    ),
    "anthropic": lambda n: (
        [{"role": "user", "content": "go"}] + [m for i in range(n) for m in anthropic_step(i)]
    ),
    "responses": lambda n: (
        [{"role": "user", "content": "go"}] + [m for i in range(n) for m in responses_step(i)]
    ),
}


def scan(messages: list[Message], fmt: Format) -> list[LoopVerdict]:
    events = as_agent_events(history_events(messages, fmt), session_id="s", started=TS)
    return list(Scanner(DetectionConfig()).run(events))


def test_each_format_gives_one_event_per_message_and_result() -> None:
    for fmt, history in HISTORIES.items():
        events = history_events(history(3), fmt)
        kinds = [e.kind for e in events]
        assert kinds == ["user_message"] + ["assistant_message", "tool_result"] * 3, fmt
        result = events[2]
        assert result.tool_name in ("edit_file", "search") and result.call_id


def test_the_converted_histories_loop_as_the_contract_says() -> None:
    rules = {
        fmt: {v.warning.rule for v in scan(h(3), fmt) if v.warning} for fmt, h in HISTORIES.items()
    }
    # Chat has no error flag: the same result thrice; Anthropic's is_error: a failed edit
    assert rules["openai"] == {"repeated_result", "repeated_batch"}
    assert rules["anthropic"] == {"repeated_failed_mutation"}
    assert rules["responses"] == {"repeated_result", "repeated_batch"}
    assert all(v.warning is None for v in scan(HISTORIES["openai"](1), "openai"))


def test_responses_turn_is_one_assistant_event_anchored_to_its_last_item() -> None:
    items: list[Message] = [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "id": "rs", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "t"}]},
        {"type": "function_call", "call_id": "a", "name": "x", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "y", "arguments": "not json"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call_output", "call_id": "b", "output": "2"},
        {"type": "web_search_call", "id": "ws"},
    ]
    events = history_events(items, "responses")
    assert [(e.kind, e.message_index) for e in events] == [
        ("user_message", 0),
        ("assistant_message", 4),
        ("tool_result", 5),
        ("tool_result", 6),
    ]
    assert events[0].text == "hi" and events[1].text == "t"
    assert [c.arguments for c in events[1].calls] == [{}, "not json"]
    assert [e.tool_name for e in events[2:]] == ["x", "y"]


def test_placed_warnings_are_never_published_again() -> None:
    fed_back = [
        {"role": "user", "content": "go"},
        {"role": "system", "content": MARKER + "Loop warning ..."},
    ]
    assert [e.kind for e in history_events(fed_back, "openai")] == ["user_message"]
    turn = {"role": "user", "content": [{"type": "text", "text": MARKER + "w"}]}
    assert history_events([turn], "anthropic") == []


def test_responses_placement_keeps_calls_with_their_outputs() -> None:
    items = HISTORIES["responses"](2)  # user, (reasoning, call, output) x2
    warnings = {2: ["call warning"], 3: ["output warning"], 0: ["user warning"]}
    prompt = place_responses(items, warnings)
    check_responses(prompt)
    texts = [(i, m["content"]) for i, m in enumerate(prompt) if m.get("role") == "system"]
    assert texts == [
        (1, MARKER + "user warning"),
        (5, MARKER + "call warning"),
        (6, MARKER + "output warning"),
    ]
    assert items == HISTORIES["responses"](2)  # the history itself is untouched
    later = place_responses(HISTORIES["responses"](3), warnings)
    assert later[: len(prompt)] == prompt  # the same prefix as the history grows


class LocalWorker:
    """Decodes published records and answers them with the real detector at once."""

    def __init__(self) -> None:
        self.scanner = Scanner(DetectionConfig())
        self.records: list[bytes] = []
        self.session: Session | None = None

    async def publish(self, _session_id: str, record: bytes) -> None:
        self.records.append(record)
        assert self.session is not None
        for verdict in self.scanner.run([decode_event(record)]):
            self.session.on_verdict(verdict)


def local_tracker(fmt: Format) -> tuple[HistoryTracker, LocalWorker]:
    worker = LocalWorker()
    session = Session(
        session_id="s",
        encoder=EventEncoder(session_id="s", agent_id=None, local_fingerprints=False),
        publish=worker.publish,
        on_close=lambda _s: None,
        stats=ClientStats(),
        clock=lambda: TS,
        default_timeout=1.0,
    )
    worker.session = session
    return HistoryTracker(session, fmt), worker


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses"])
async def test_tracker_publishes_each_message_once_and_places_the_warning(fmt: Format) -> None:
    tracker, worker = local_tracker(fmt)
    check = {"openai": check_openai, "anthropic": check_anthropic, "responses": check_responses}
    clean = await tracker.prompt(HISTORIES[fmt](1))
    assert clean == HISTORIES[fmt](1)
    assert await tracker.prompt(HISTORIES[fmt](1)) == clean  # again: nothing new published
    assert len(worker.records) == 3
    history = HISTORIES[fmt](3)
    prompt = await tracker.prompt(history)
    assert len(worker.records) == 7
    check[fmt](prompt)
    assert any(MARKER in json.dumps(m) for m in prompt)
    assert history == HISTORIES[fmt](3)  # the stored history never gets the warning
    seqs = [json.loads(r)["seq"] for r in worker.records]
    assert seqs == list(range(7))


async def test_tracker_survives_trimming_without_republishing_or_misplacing() -> None:
    tracker, worker = local_tracker("openai")
    history = HISTORIES["openai"](3)
    first = await tracker.prompt(history)
    warned_after = next(i for i, m in enumerate(first) if m["role"] == "system") - 1
    assert first[warned_after] == history[-1]
    published = len(worker.records)
    # the runtime summarises the first two steps away and appends a new user turn
    trimmed = [{"role": "system", "content": "summary of earlier work"}, *history[5:]]
    trimmed.append({"role": "user", "content": "try something else"})
    prompt = await tracker.prompt(trimmed)
    assert len(worker.records) == published + 1  # only the new user message
    assert json.loads(worker.records[-1])["type"] == "user_message"
    check_openai(prompt)
    # the warning still follows the same tool message, now at index 2
    assert prompt[2] == history[-1] and prompt[3]["content"].startswith(MARKER)


async def test_a_history_with_nothing_known_is_not_published_again() -> None:
    tracker, worker = local_tracker("openai")
    await tracker.prompt(HISTORIES["openai"](2))
    published = len(worker.records)
    await tracker.prompt([{"role": "user", "content": "a whole new context"}])
    assert len(worker.records) == published


def parallel_responses_history() -> list[Message]:
    return [
        {"role": "user", "content": "check both"},
        {"type": "reasoning", "id": "rs", "summary": []},
        {"type": "function_call", "call_id": "a", "name": "x", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "y", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call_output", "call_id": "b", "output": "2"},
        {"type": "message", "role": "assistant", "content": "done"},
        {"role": "user", "content": "again"},
    ]


def test_responses_a_warning_at_any_item_keeps_the_input_valid_and_prefix_stable() -> None:
    items = parallel_responses_history()
    anchored = [i for i, item in enumerate(items) if item.get("type") != "reasoning"]
    for index in anchored:
        prompt = place_responses(items, {index: ["w"]})
        check_responses(prompt)
        for end in range(index + 1, len(items) + 1):
            shorter = items[:end]
            try:
                check_responses(shorter)
            except AssertionError:
                continue  # not a history a model is ever called with
            placed = place_responses(shorter, {index: ["w"]})
            # the warning sits where it will stay as the history grows
            assert placed == prompt[: len(placed)]


def test_the_responses_validator_catches_what_the_api_rejects() -> None:
    call = {"type": "function_call", "call_id": "a", "name": "x", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "a", "output": "1"}
    system = {"type": "message", "role": "system", "content": "x"}
    with pytest.raises(AssertionError):
        check_responses([call, system, output])  # between a call and its output
    with pytest.raises(AssertionError):
        check_responses([output])  # answers nothing
    with pytest.raises(AssertionError):
        check_responses([call])  # unanswered
    with pytest.raises(AssertionError):
        check_responses([{"type": "reasoning", "id": "r"}, system, call, output])
    check_responses([{"type": "reasoning", "id": "r"}, call, output, system])


async def test_a_message_edited_in_place_keeps_its_number_and_the_next_one_is_published() -> None:
    # The runtime's history list grows by appending; it edits an old message in place
    # (e.g. shortens a long tool result). The same object is the same message: not new,
    # and the message appended after it is published.
    tracker, worker = local_tracker("openai")
    history = HISTORIES["openai"](2)
    await tracker.prompt(history)
    published = len(worker.records)
    history[-1]["content"] = "(shortened)"  # the newest tool result
    history.append({"role": "user", "content": "go on"})
    await tracker.prompt(history)
    assert len(worker.records) == published + 1
    assert json.loads(worker.records[-1])["type"] == "user_message"


async def test_equal_messages_in_new_objects_are_recognised_by_content() -> None:
    tracker, worker = local_tracker("openai")
    await tracker.prompt(HISTORIES["openai"](2))
    published = len(worker.records)
    await tracker.prompt(json.loads(json.dumps(HISTORIES["openai"](2))))  # fresh objects
    assert len(worker.records) == published
