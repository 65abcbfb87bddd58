"""`loopwatch scan`, run as the user runs it (a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loopwatch.streams.commands.exit_codes import EXIT_INVALID_INPUT, EXIT_LOOP_FOUND
from tests.support.builders import SessionBuilder
from tests.support.shared_data import trajectory_files


def scan(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "scan", *args],
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
    assert done.returncode == EXIT_LOOP_FOUND
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


GARBAGE_LINES = [
    b'{"type":"user_message","session_id":"s\\ud800","seq":0,"ts":"2026-12-02T09:00:00Z"}',
    b"\xff\xfe not utf-8",
    b'{"x": NaN}',
    b"[" * 100_000,  # deeper than the JSON decoder's recursion
    b'{"type":"user_message","session_id":"s","seq":' + b"9" * 5000 + b',"ts":"x"}',
    b"null",
]


def test_garbage_never_ends_in_a_traceback_and_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "garbage.jsonl"
    good = looping_file(tmp_path).read_bytes()
    path.write_bytes(b"\n".join(GARBAGE_LINES) + b"\n" + good)
    done = scan(str(path))
    stderr = done.stderr.decode()
    assert "Traceback" not in stderr
    assert done.returncode == 0  # invalid lines alone do not fail without --strict
    assert f"{path}: line 1: skipped, schema: session_id: string is not valid Unicode" in stderr
    assert f"{path}: line 2: skipped, not_utf8" in stderr
    assert "; 7 invalid lines" in stderr  # the six above and the `{broken` line
    assert len(done.stdout.splitlines()) == 9  # the valid events still got their verdicts
    strict = scan("--strict", "--fail-on-loop", str(path))
    assert strict.returncode == EXIT_INVALID_INPUT  # garbage wins over the loop found
    broken = scan("--strict", str(looping_file(tmp_path)))  # its `{broken` line
    assert broken.returncode == EXIT_INVALID_INPUT


def test_strict_passes_clean_input_and_fail_on_loop_still_says_loop_found(tmp_path: Path) -> None:
    a = SessionBuilder("clean")
    a.call("search", {"q": 1})
    a.result(result="something")
    path = tmp_path / "clean.jsonl"
    path.write_text("".join(e.model_dump_json() + "\n" for e in a.events))
    assert scan("--strict", "--fail-on-loop", str(path)).returncode == 0
    looping = tmp_path / "looping.jsonl"
    looping.write_bytes(
        b"".join(
            line
            for line in looping_file(tmp_path).read_bytes().splitlines(True)
            if b"broken" not in line
        )
    )
    assert scan("--strict", "--fail-on-loop", str(looping)).returncode == EXIT_LOOP_FOUND


def test_several_files_are_one_scan(tmp_path: Path) -> None:
    lines = looping_file(tmp_path).read_bytes().splitlines(keepends=True)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(lines[:5]))
    second.write_bytes(b"".join(lines[5:]))
    done = scan("--warnings-only", str(first), str(second))
    assert done.returncode == 0, done.stderr
    # the session carries over from one file to the next: the third repeat is in `second`
    assert [json.loads(line)["seq"] for line in done.stdout.splitlines()] == [4, 5]
    assert f"{second}: line 1: skipped, not_json" in done.stderr.decode()
    missing = scan(str(first), str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2
    assert missing.stdout == b""  # nothing scanned when one file cannot be read
    assert scan("-", "-", stdin=b"").returncode == 2


def scan_env(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "scan", *args],
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )


def test_thresholds_come_from_the_worker_environment_and_flags_win(tmp_path: Path) -> None:
    path = str(looping_file(tmp_path))
    raised = scan_env({"LOOPWATCH_THRESHOLD": "4"}, "--fail-on-loop", path)
    assert raised.returncode == 0  # three repeats are below 4
    overridden = scan_env({"LOOPWATCH_THRESHOLD": "4"}, "--fail-on-loop", "--threshold", "3", path)
    assert overridden.returncode == EXIT_LOOP_FOUND
    for value in ("0", "2.5", "true"):
        bad = scan_env({"LOOPWATCH_THRESHOLD": value}, path)
        assert bad.returncode == 2
        assert f"LOOPWATCH_THRESHOLD must be an integer >= 1, got '{value}'" in bad.stderr.decode()
        assert bad.stdout == b""
    bad = scan_env({"LOOPWATCH_MUTATING_FAILURE_THRESHOLD": "-1"}, path)
    assert "LOOPWATCH_MUTATING_FAILURE_THRESHOLD must be an integer >= 1" in bad.stderr.decode()
    # a bad value for something scan does not use is not its business
    assert scan_env({"LOOPWATCH_PARTITIONS": "zero"}, path).returncode == 0


def test_bad_options_exit_2_without_a_traceback(tmp_path: Path) -> None:
    for args in (["--no-such-flag", "x"], [], [str(tmp_path)]):
        done = scan(*args)
        assert done.returncode == 2, args
        assert b"Traceback" not in done.stderr


def test_version_and_help_name_the_contract_users_have() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown.stdout.startswith("loopwatch 0.")
    helped = subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "docs/contract.md" in helped.stdout and "SPEC" not in helped.stdout
