"""`loopwatch replay`'s parts that need no broker: reading recorded input (events,
transcripts, gzip), preparing the events it publishes (run tag, rebase), comparing live
warnings with scan's per session, and its usage errors."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loopwatch.models import AgentEvent
from loopwatch.streams.cli import main
from loopwatch.streams.commands.exit_codes import (
    EXIT_CODES,
    EXIT_MISMATCH,
    EXIT_NO_EVENTS,
    EXIT_USAGE,
)
from loopwatch.streams.commands.replay import prepared, summary
from loopwatch.streams.scan.compare import compare
from loopwatch.streams.scan.recorded import as_events, read_recorded
from tests.support.builders import SessionBuilder


def _events() -> list[str]:
    b = SessionBuilder("s1")
    b.user("hi")
    b.step(("read_file", {"path": "a.py"}))
    return [e.model_dump_json() for e in b.events]


def test_recorded_events_plain_and_gzip_give_the_same_events(tmp_path: Path) -> None:
    lines = "\n".join([*_events(), "{not json"]) + "\n"
    plain, packed = tmp_path / "e.jsonl", tmp_path / "e.jsonl.gz"
    plain.write_text(lines)
    packed.write_bytes(gzip.compress(lines.encode()))
    one, two = read_recorded([str(plain)], "events"), read_recorded([str(packed)], "events")
    assert [e.seq for e in one.events] == [e.seq for e in two.events] == [0, 1]
    assert [s.line for s in one.skipped] == [s.line for s in two.skipped] == [3]


def test_recorded_transcripts_become_events(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "read_file", "arguments": "{}"}}]},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps(messages))
    recorded = read_recorded([str(path)], "openai")
    assert [e.type for e in recorded.events] == ["user_message", "assistant_message"]
    assert [e.type for e in as_events(messages, "openai").events] == [
        "user_message",
        "assistant_message",
    ]


def test_prepared_tags_sessions_and_rebases_keeping_gaps() -> None:
    events = read_events_of(_events())
    now = datetime(2030, 1, 1, tzinfo=UTC)
    out = prepared(events, run_id="r1", rebase_to=now)
    assert {e.session_id for e in out} == {"s1@r1"}
    assert out[-1].ts == now and out[1].ts - out[0].ts == events[1].ts - events[0].ts
    assert prepared(events, run_id=None, rebase_to=None) == events


def read_events_of(lines: list[str]) -> list[AgentEvent]:
    return as_events(lines, "events").events


def test_compare_matches_warning_for_warning_and_names_what_differs() -> None:
    expected = {("a", 1): None, ("a", 2): "repeated_result", ("b", 1): "repeated_batch"}
    live = {("a", 1): None, ("a", 2): "repeated_result", ("b", 1): None, ("x", 9): "x"}
    a, b = compare(expected, live, ["a", "b"])
    assert (a.verdict, b.verdict) == ("match", "mismatch")
    assert "live=-" in b.line() and "scan=1:repeated_batch" in b.line()
    (late,) = compare(expected, {("a", 1): None}, ["a"])
    assert late.verdict == "incomplete" and "missing=1" in late.line()
    text = summary([a, b], 3, "r1")
    assert "1 match, 1 mismatch, 0 incomplete; 1 warnings live, 2 in scan" in text


def test_usage_errors_exit_before_touching_kafka(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("{not json\n")
    assert main(["replay", str(empty)]) == EXIT_NO_EVENTS
    assert "no event to replay" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "missing.jsonl")]) == EXIT_USAGE
    assert "cannot read input" in capsys.readouterr().err
    codes = [code for code, _ in EXIT_CODES]
    assert EXIT_MISMATCH in codes and len(set(codes)) == len(codes), "one meaning each"
