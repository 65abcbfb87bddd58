"""`loopwatch report` reads what `scan` reads and judges as it does (issue 32): transcripts,
gzip, --profile, --policy and LOOPWATCH_*; it lists every loop (session, rule, tools,
first/last seq), agrees with `scan --episodes`, and says so in JSON on request."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from loopwatch.streams.commands.exit_codes import EXIT_NO_EVENTS, EXIT_OK, EXIT_USAGE
from tests.unit.fleetview.test_report import embedded, looping_session, write_events
from tests.unit.scan.test_transcripts import anthropic_loop, chat_loop


def loopwatch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def transcripts(tmp_path: Path) -> Path:
    path = tmp_path / "runs.jsonl"
    runs = [
        {"session_id": "chat", "agent_id": "a", "messages": chat_loop(4)},
        {"session_id": "claude", "agent_id": "b", "messages": anthropic_loop(3)},
    ]
    path.write_text("".join(json.dumps(run) + "\n" for run in runs))
    return path


def report(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    out = tmp_path / "report.html"
    done = loopwatch("report", *args, "--out", str(out), env=env)
    assert done.returncode == EXIT_OK, done.stderr
    return embedded(out.read_text("utf-8"))


def test_transcripts_reach_the_report_and_every_loop_is_listed(tmp_path: Path) -> None:
    path = transcripts(tmp_path)
    numbers = report(tmp_path, str(path))
    episodes = [
        json.loads(line) for line in loopwatch("scan", "--episodes", str(path)).stdout.splitlines()
    ]
    assert numbers["totals"]["loops"] == len(episodes) > 0  # as scan --episodes
    listed = {(e["session_id"], e["rule"], e["first_seq"], e["last_seq"]) for e in episodes}
    rows = numbers["loop_list"]
    assert {(r["session_id"], r["rule"], r["first_seq"], r["last_seq"]) for r in rows} == listed
    assert {r["session_id"] for r in rows} == {"chat", "claude"}
    assert all(r["tool_names"] and r["first_seq"] <= r["last_seq"] for r in rows)
    assert rows == sorted(rows, key=lambda r: (r["session_id"], r["first_seq"]))


def test_gzip_and_standard_input(tmp_path: Path) -> None:
    plain = transcripts(tmp_path)
    packed = tmp_path / "runs.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    expected = report(tmp_path, str(plain))["totals"]
    assert report(tmp_path, str(packed))["totals"] == expected


def test_profile_policy_and_settings_reach_the_report(tmp_path: Path) -> None:
    s_events = tmp_path / "events.jsonl"
    triple = {"name": "status", "arguments": {"job": 7}}
    event = {
        "type": "assistant_message",
        "session_id": "s",
        "seq": 0,
        "ts": "2026-12-03T09:00:00Z",
        "tool_calls": [{"id": f"c{n}", **triple} for n in range(3)],
    }
    s_events.write_text(json.dumps(event) + "\n")  # identical calls in one turn: rule 5
    assert report(tmp_path, str(s_events))["totals"]["warnings"] == 0  # seed
    assert report(tmp_path, str(s_events), "--profile", "extended")["totals"]["warnings"] == 1
    extended = {"LOOPWATCH_PROFILE": "extended"}
    assert report(tmp_path, str(s_events), env=extended)["totals"]["warnings"] == 1
    record = tmp_path / "policy.json"
    record.write_text('{"profile": "extended", "call_in_turn_threshold": 4}')
    assert report(tmp_path, str(s_events), "--policy", str(record))["totals"]["warnings"] == 0
    both = loopwatch("report", str(s_events), "--policy", str(record), "--profile", "seed")
    assert both.returncode == EXIT_USAGE and "--policy and --profile" in both.stderr


def test_json_summary_and_no_valid_event(tmp_path: Path) -> None:
    path = write_events(tmp_path / "events.jsonl", looping_session())
    out = tmp_path / "r.html"
    done = loopwatch("report", str(path), "--out", str(out), "--json")
    summary = json.loads(done.stdout)
    assert summary["totals"]["loops"] == 1 and summary["report"] == str(out)
    assert summary["by_rule"]["repeated_failed_mutation"] == 1
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("{broken\n")
    empty = loopwatch("report", str(garbage), "--out", str(tmp_path / "g.html"))
    assert empty.returncode == EXIT_NO_EVENTS
    assert "no valid event in the input" in empty.stderr
    assert not (tmp_path / "g.html").exists()
    # the Chat transcript refused for the named format, the Anthropic one read
    wrong = report(tmp_path, "--format", "anthropic", str(transcripts(tmp_path)))
    assert wrong["totals"]["skipped_lines"] == 1
    assert {row["session_id"] for row in wrong["loop_list"]} == {"claude"}
