"""`loopwatch scan`, run as the user runs it (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.builders import SessionBuilder
from tests.shared_data import trajectory_files


def scan(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", "scan", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )


def looping_file(tmp_path: Path) -> Path:
    a, b = SessionBuilder("a"), SessionBuilder("b")
    for _ in range(3):
        a.call("search", {"q": 1})
        b.text("hello")
        a.result(result="nothing")
    lines = []
    for ea, eb in zip(a.events, b.events, strict=False):
        lines += [ea.model_dump_json(), eb.model_dump_json()]
    lines += [e.model_dump_json() for e in a.events[len(b.events) :]]
    lines.insert(3, a.events[0].model_dump_json())  # a duplicate
    lines.insert(5, "{broken")
    lines.insert(6, "")
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_one_verdict_per_processed_event_in_input_order(tmp_path: Path) -> None:
    done = scan(str(looping_file(tmp_path)))
    assert done.returncode == 0, done.stderr
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(v["session_id"], v["seq"]) for v in verdicts] == [
        ("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("a", 4), ("a", 5)
    ]  # fmt: skip
    assert [v["warning"]["rule"] for v in verdicts if v["warning"]] == [
        "repeated_batch",  # the third identical call
        "repeated_result",  # its result
    ]
    assert all(v["evaluated_at"] == v["event_ts"] for v in verdicts)  # deterministic
    stderr = done.stderr.decode()
    assert "line 6: skipped, not_json" in stderr
    assert (
        "9 events, 2 sessions, 2 warnings (repeated_batch=1, repeated_result=1), 1 duplicate"
        in stderr
    )


def test_warnings_only_and_fail_on_loop(tmp_path: Path) -> None:
    path = str(looping_file(tmp_path))
    done = scan("--warnings-only", "--fail-on-loop", path)
    assert done.returncode == 1
    assert [json.loads(line)["seq"] for line in done.stdout.splitlines()] == [4, 5]
    clean = scan("--fail-on-loop", "--threshold", "4", path)
    assert clean.returncode == 0
    assert all(json.loads(line)["warning"] is None for line in clean.stdout.splitlines())


def test_reads_standard_input(tmp_path: Path) -> None:
    done = scan("-", stdin=looping_file(tmp_path).read_bytes())
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 9


def test_invalid_config_exits_2_naming_the_setting(tmp_path: Path) -> None:
    path = str(looping_file(tmp_path))
    for flag, value, message in [
        ("--threshold", "0", "threshold must be an integer >= 1, got 0"),
        ("--threshold", "2.5", "threshold must be an integer >= 1, got '2.5'"),
        (
            "--mutating-failure-threshold",
            "true",
            "mutating_failure_threshold must be an integer >= 1, got 'true'",
        ),
    ]:
        done = scan(flag, value, path)
        assert done.returncode == 2
        assert message in done.stderr.decode()
        assert done.stdout == b""


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    done = scan(str(tmp_path / "nope.jsonl"))
    assert done.returncode == 2
    assert "cannot read" in done.stderr.decode()


def test_shared_trajectories_scan_clean_and_deterministically() -> None:
    for path in trajectory_files():
        first = scan(str(path))
        second = scan(str(path))
        assert first.returncode == 0, first.stderr
        assert b"skipped," not in first.stderr  # every line decodes
        assert first.stdout == second.stdout
        assert first.stdout.count(b"\n") > 100
        for line in first.stdout.splitlines():
            verdict = json.loads(line)
            assert verdict["type"] == "loop_verdict"


def test_shared_swe_agent_flag_loop_is_found() -> None:
    files = [p for p in trajectory_files() if p.name.startswith("swe-agent")]
    assert files, "swe-agent trajectories expected beside the others"
    done = scan("--warnings-only", str(files[0]))
    warned = {json.loads(line)["session_id"] for line in done.stdout.splitlines()}
    assert "swe-trajectories_demonstrations_ctf_crypto_eps" in warned


def test_version_and_help_name_the_contract_users_have() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "streams.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown.stdout.startswith("loopwatch 0.")
    helped = subprocess.run(
        [sys.executable, "-m", "streams.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "docs/contract.md" in helped.stdout and "SPEC" not in helped.stdout
