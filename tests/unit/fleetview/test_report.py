"""`loopwatch report`: loops in recorded sessions, tallied and written as one HTML page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from loopwatch.models import AgentEvent, DetectionConfig, decode_event
from loopwatch.streams.cli import main
from loopwatch.streams.fleetview.report import collect, render_html
from loopwatch.streams.scan.scanner import Scanner
from tests.support.builders import SessionBuilder
from tests.support.shared_data import trajectory_files

CONFIG = DetectionConfig()


def write_events(path: Path, events: list[AgentEvent], extra_lines: tuple[str, ...] = ()) -> Path:
    lines = [e.model_dump_json() for e in events] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def looping_session() -> list[AgentEvent]:
    """Ten events; the failing edit warns at the 2nd failure (index 4) and at the call after
    it; the successful edit ends the loop; then session_end."""
    s = SessionBuilder("edit-loop", agent_id="coder")
    s.user("fix it")
    for _ in range(2):
        s.call("edit_file", {"path": "a.py", "old": "x", "new": "y"})
        s.result(error="old text not found")
    s.call("edit_file", {"path": "a.py", "old": "z", "new": "y"})
    s.result(result="ok")
    s.text("done")
    s.end()
    return s.events


def clean_session() -> list[AgentEvent]:
    s = SessionBuilder("clean", agent_id="helper")
    s.user()
    s.call("read_file", {"path": "a.py"})
    s.result(result="text")
    s.text("done")
    return s.events


def embedded(html: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html)
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def test_a_loop_is_counted_by_rule_agent_tool_and_session(tmp_path: Path) -> None:
    path = write_events(tmp_path / "events.jsonl", looping_session() + clean_session())
    numbers = collect([path], CONFIG).to_json()
    assert numbers["totals"] == {
        "events": 13,
        "sessions": 2,
        "sessions_with_loops": 1,
        "loops": 1,
        "warnings": 2,
        "skipped_lines": 0,
    }
    assert numbers["by_rule"]["repeated_failed_mutation"] == 1
    assert sum(numbers["by_rule"].values()) == 1
    assert dict(numbers["by_agent"]) == {"coder": 1}
    assert dict(numbers["by_tool"]) == {"edit_file": 1}
    assert numbers["top_sessions"] == [
        {"session_id": "edit-loop", "agent_id": "coder", "loops": 1, "warnings": 2, "events": 9}
    ]
    assert numbers["repeats"]["counts"][0] == 1  # peak count 2
    # the first warning is the session's 5th event (index 4) of 9: the 40-50% tenth
    assert numbers["start_position"]["counts"][4] == 1
    assert numbers["outcomes"] == {"broken": 1}


def test_the_html_is_self_contained_and_holds_the_numbers(tmp_path: Path) -> None:
    path = write_events(tmp_path / "events.jsonl", looping_session())
    numbers = collect([path], CONFIG).to_json()
    html = render_html(numbers)
    assert embedded(html) == json.loads(json.dumps(numbers))
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # no network
    assert "<script src" not in html
    assert '<link rel="stylesheet"' not in html
    assert "/*@" not in html  # every placeholder filled
    assert "old text not found" not in html  # no content, names only


def test_a_session_id_cannot_end_the_inline_script(tmp_path: Path) -> None:
    s = SessionBuilder("</script><b>x", agent_id="a")
    for _ in range(3):
        s.call("bash", {"command": "make"})
        s.result(error="exit 2")
    html = render_html(collect([write_events(tmp_path / "e.jsonl", s.events)], CONFIG).to_json())
    assert embedded(html)["top_sessions"][0]["session_id"] == "</script><b>x"


def test_the_cli_writes_the_page_and_prints_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_events(
        tmp_path / "events.jsonl", looping_session(), extra_lines=("not json", '{"v": 9}')
    )
    out = tmp_path / "report.html"
    assert main(["report", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "9 events, 1 session from 1 file: 1 loop in 1 session (100%)" in captured.out
    assert "most loops: edit-loop" in captured.out
    assert "2 lines skipped" in captured.out
    assert "events.jsonl line 10" in captured.err
    assert embedded(out.read_text("utf-8"))["totals"]["skipped_lines"] == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "missing.jsonl"], "cannot read missing.jsonl"),
        (["report", "{events}", "--threshold", "0"], "invalid config"),
        (["report", "{events}", "--out", "/no/such/dir/r.html"], "does not exist"),
    ],
)
def test_bad_input_gets_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    events = write_events(tmp_path / "events.jsonl", clean_session())
    argv = [arg.replace("{events}", str(events)) for arg in argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage error
        code = int(str(exc.code))
    assert code == 2
    assert message in capsys.readouterr().err


@pytest.mark.shared
def test_the_shared_trajectories_render(tmp_path: Path) -> None:
    files = trajectory_files()
    out = tmp_path / "report.html"
    assert main(["report", *map(str, files), "--out", str(out)]) == 0
    numbers = embedded(out.read_text("utf-8"))
    scanner = Scanner(CONFIG)
    for path in files:
        with path.open("rb") as source:
            for line in source:
                if line.strip():
                    scanner.judge(decode_event(line))
    totals = numbers["totals"]
    assert totals["events"] == scanner.stats.events
    assert totals["sessions"] == len(scanner.stats.sessions)
    assert totals["warnings"] == sum(scanner.stats.warnings.values())
    assert totals["loops"] >= 1  # the SWE-agent CTF run submits the same flag again and again
    assert sum(numbers["by_rule"].values()) == totals["loops"]
    assert sum(numbers["repeats"]["counts"]) == totals["loops"]
    assert sum(numbers["start_position"]["counts"]) == totals["loops"]
