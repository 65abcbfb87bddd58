"""`loopwatch.scan`, the in-process API: what `loopwatch scan` computes, with the result's
plain and Jupyter views; docs/scan.md's example runs here as a doctest."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

import pytest

import loopwatch
from loopwatch.models import DetectionConfig
from loopwatch.streams.scan.scanner import Scanner
from tests.support.builders import SessionBuilder
from tests.support.shared_data import REPO_ROOT, trajectory_files

LOOPING = REPO_ROOT / "examples" / "sessions" / "looping.jsonl"


def test_docs_scan_md_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    failed, attempted = doctest.testfile(
        str(REPO_ROOT / "docs" / "scan.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert attempted >= 5 and failed == 0


def test_the_same_verdicts_and_episodes_as_the_command() -> None:
    result = loopwatch.scan(LOOPING)
    out = subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "scan", str(LOOPING)],
        capture_output=True,
        check=True,
        cwd=REPO_ROOT,
    ).stdout
    assert b"".join(v.to_json() + b"\n" for v in result.verdicts) == out
    episodes = subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "scan", "--episodes", str(LOOPING)],
        capture_output=True,
        check=True,
        cwd=REPO_ROOT,
    ).stdout
    assert b"".join(e.to_json() + b"\n" for e in result.episodes) == episodes


def test_events_dicts_and_json_lines_are_one_input() -> None:
    b = SessionBuilder("s1")
    b.user("fix it")
    for _ in range(4):
        b.step(("read_file", {"path": "a.py"}))
        b.result(result="same")
    as_models = loopwatch.scan(b.events)
    as_dicts = loopwatch.scan([e.model_dump(mode="json") for e in b.events])
    as_lines = loopwatch.scan([e.model_dump_json() for e in b.events] + ["{broken"])
    expected = [v.to_json() for v in Scanner(DetectionConfig()).run(b.events)]
    for result in (as_models, as_dicts, as_lines):
        assert [v.to_json() for v in result.verdicts] == expected
    assert as_lines.warnings and [s.line for s in as_lines.skipped] == [len(b.events) + 1]
    assert "repeated_result" in as_models.warnings_by_rule()


def test_views_name_sessions_and_warnings_by_rule() -> None:
    result = loopwatch.scan(LOOPING)
    assert repr(result).startswith("<ScanResult: 3 sessions, 32 events, 12 warnings (")
    page = result._repr_html_()
    assert "<td>repeated_failed_mutation</td><td>5</td><td>1</td>" in page
    assert "3 sessions" in page
    clean = loopwatch.scan([{"role": "user", "content": "<hi>"}], format="openai")
    assert "no warnings" in clean._repr_html_()


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="format must be one of"):
        loopwatch.scan([], format="csv")
    with pytest.raises(ValueError, match="profile or config"):
        loopwatch.scan([], profile="seed", config=DetectionConfig())


def test_import_loopwatch_stays_light() -> None:
    code = (
        "import sys, loopwatch; print(sorted(m for m in sys.modules "
        "if m.startswith(('loopwatch.', 'pydantic', 'aiokafka', 'faust'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.shared
def test_the_shared_trajectories_in_process_equal_the_command() -> None:
    files = trajectory_files()
    out = subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "scan", *map(str, files)],
        capture_output=True,
        check=True,
        cwd=REPO_ROOT,
    ).stdout
    events: list[str] = []
    for path in files:
        events.extend(Path(path).read_text().splitlines())
    result = loopwatch.scan(events)
    assert b"".join(v.to_json() + b"\n" for v in result.verdicts) == out
