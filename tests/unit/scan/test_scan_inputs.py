"""`scan`'s inputs (issue 32): the format told by the input, a wrong `--format` refused,
no valid event an error of its own, gzip, the JSON summary, one policy reader."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from loopwatch.streams.commands.exit_codes import EXIT_LOOP_FOUND, EXIT_NO_EVENTS, EXIT_USAGE
from loopwatch.streams.scan import formats
from tests.unit.scan.test_scan_cli import looping_file, scan
from tests.unit.scan.test_transcripts import anthropic_loop, chat_loop, responses_loop

GEMINI = [
    {"role": "user", "parts": [{"text": "status?"}]},
    {"role": "model", "parts": [{"functionCall": {"name": "status", "args": {}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "status", "response": {}}}]},
]
BEDROCK = [
    {"role": "user", "content": [{"text": "status?"}]},
    {"role": "assistant", "content": [{"toolUse": {"toolUseId": "b1", "name": "s", "input": {}}}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "b1", "content": [{"text": "x"}]}}]},
]


@pytest.mark.parametrize(
    ("messages", "fmt"),
    [
        (chat_loop(2), "openai"),
        (anthropic_loop(2), "anthropic"),
        (responses_loop(2), "responses"),
        (GEMINI, "gemini"),
        (BEDROCK, "bedrock"),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "openai"),
    ],
)
def test_each_format_is_told_by_its_own_marks(messages: list[dict[str, Any]], fmt: str) -> None:
    assert formats.detect(messages, {}) == fmt
    for other in ("openai", "anthropic", "responses", "gemini", "bedrock"):
        refused = formats.mismatch(other, messages, {})  # type: ignore[arg-type]
        if other == fmt or len(messages) == 2:  # plain text: every format reads it alike
            assert refused is None
        else:
            assert refused is not None and f"--format {fmt}" in refused


def test_marks_of_two_formats_are_reported_not_guessed() -> None:
    told = formats.detect([*chat_loop(1), *anthropic_loop(1)], {})
    assert told == "it has marks of several formats (anthropic, openai)"


def transcript_file(tmp_path: Path, messages: list[dict[str, Any]], name: str) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"session_id": "t", "messages": messages}) + "\n")
    return path


def test_a_transcript_read_with_the_wrong_format_is_refused_naming_the_right_one(
    tmp_path: Path,
) -> None:
    path = transcript_file(tmp_path, chat_loop(4), "chat.jsonl")
    wrong = scan("--format", "anthropic", "--fail-on-loop", str(path))
    stderr = wrong.stderr.decode()
    assert "line 1: skipped, this is not an anthropic conversation but an openai" in stderr
    assert "use --format openai" in stderr
    assert wrong.stdout == b""
    assert wrong.returncode == EXIT_NO_EVENTS  # never a pass of a gate that read nothing
    assert "no valid event in the input" in stderr
    right = scan("--fail-on-loop", str(path))  # auto, the default
    assert right.returncode == EXIT_LOOP_FOUND, right.stderr
    assert scan("--format", "openai", "--fail-on-loop", str(path)).stdout == right.stdout


def test_auto_reads_events_and_transcripts_alike_and_events_output_is_unchanged(
    tmp_path: Path,
) -> None:
    events = looping_file(tmp_path)
    assert scan(str(events)).stdout == scan("--format", "events", str(events)).stdout
    both = transcript_file(tmp_path, anthropic_loop(3), "claude.jsonl")
    done = scan("--warnings-only", str(events), str(both))
    rules = [json.loads(line)["warning"]["rule"] for line in done.stdout.splitlines()]
    assert rules[-1] == "repeated_failed_mutation"  # the transcript, read as Anthropic


def test_no_valid_event_is_an_error_of_its_own(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("{broken\nnull\n")
    done = scan("--fail-on-loop", str(garbage))
    assert done.returncode == EXIT_NO_EVENTS
    assert "0 events, 0 sessions" in done.stderr.decode()
    assert "no valid event in the input, nothing was checked" in done.stderr.decode()
    assert scan("-", stdin=b"").returncode == EXIT_NO_EVENTS
    assert scan("-", stdin=b"\n\n").returncode == EXIT_NO_EVENTS


def test_gzip_input_is_read_as_the_plain_file(tmp_path: Path) -> None:
    plain = looping_file(tmp_path)
    packed = tmp_path / "events.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert scan(str(packed)).stdout == scan(str(plain)).stdout != b""
    piped = scan("-", stdin=packed.read_bytes())
    assert piped.stdout == scan(str(plain)).stdout
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed.read_bytes()[:-12])
    done = scan(str(cut))
    assert done.returncode == EXIT_USAGE and f"cannot read {cut}" in done.stderr.decode()
    assert b"Traceback" not in done.stderr


def test_summary_counts_agree_with_episodes_and_say_one_thing_in_the_singular(
    tmp_path: Path,
) -> None:
    path = transcript_file(tmp_path, chat_loop(4), "chat.jsonl")
    printed = scan("--episodes", str(path))
    summary = scan(str(path)).stderr.decode()
    episodes = len(printed.stdout.splitlines())
    assert episodes > 0
    assert f"; {episodes} loop episode" in summary  # open ones too, as --episodes prints
    assert printed.stderr.decode().splitlines()[-1] == summary.splitlines()[-1]
    single = tmp_path / "single.jsonl"
    single.write_text(looping_file(tmp_path).read_text().splitlines()[0] + "\n{broken\n")
    line = scan(str(single)).stderr.decode().splitlines()[-1]
    assert "1 event, 1 session, 0 warnings (none)" in line
    assert "; 1 invalid line; 0 loop episodes" in line


def test_json_summary(tmp_path: Path) -> None:
    done = scan("--json", str(looping_file(tmp_path)))
    summary = json.loads(done.stderr.decode().splitlines()[-1])
    assert summary == {
        "events": 9,
        "sessions": 2,
        "warnings": 2,
        "warnings_by_rule": {"repeated_batch": 1, "repeated_result": 1},
        "duplicates_skipped": 1,
        "invalid_lines": 1,
        "episodes": 2,
        "episodes_by_outcome": {"expired": 2},
        "state_resets": 0,
    }


def test_policy_takes_what_policy_set_takes_and_no_flag_beside_it(tmp_path: Path) -> None:
    events = str(looping_file(tmp_path))
    record = tmp_path / "policy.json"
    record.write_text('{"threshold": 4}')  # no version: `policy set` takes it, so does scan
    done = scan("--policy", str(record), "--fail-on-loop", events)
    assert done.returncode == 0, done.stderr  # three repeats are below 4
    verdict = json.loads(done.stdout.splitlines()[0])
    assert verdict["policy"] == {"key": "*", "version": 1}
    for flag in (["--profile", "extended"], ["--threshold", "3"]):
        both = scan("--policy", str(record), *flag, events)
        assert both.returncode == EXIT_USAGE
        assert f"--policy and {flag[0]} both given" in both.stderr.decode()
    assert scan("--policy", "-", "-", stdin=b"{}").returncode == EXIT_USAGE
