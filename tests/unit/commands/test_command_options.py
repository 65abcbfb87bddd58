"""Every command checks its options up front: a bad value is a usage error (exit 2) that
names the option and the value, never a traceback nor a run that goes ahead."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwatch.streams.cli import main
from loopwatch.streams.demo.naming import DEMO_PREFIX, demo_names, new_run_prefix
from loopwatch.streams.settings import ENVIRONMENT, Settings


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["demo", "--verdict-timeout", "-1"], "--verdict-timeout: must be a number > 0, got '-1'"),
        (["demo", "--verdict-timeout", "0"], "--verdict-timeout"),
        (["demo", "--verdict-timeout", "nan"], "--verdict-timeout"),
        (["demo", "--verdict-timeout", "soon"], "got 'soon'"),
        (["demo", "--max-sessions-per-file", "0"], "--max-sessions-per-file: must be an integer"),
        (["demo", "--max-sessions-per-file", "2.0"], "got '2.0'"),
        (["demo", "--trajectories", "/no/such/dir"], "'/no/such/dir' is not a directory"),
        (["demo", "--bootstrap", "localhost"], "--bootstrap"),
        (["demo", "--bootstrap", "host:99999"], "got 'host:99999'"),
        (["topics", "create", "--timeout", "-1"], "--timeout: must be a number > 0"),
        (["worker", "--topic-timeout", "0"], "--topic-timeout: must be a number > 0"),
        (["policy", "delete", "a", "--timeout", "0"], "--timeout: must be a number > 0"),
        (["policy", "get", "a", "--timeout", "-1"], "--timeout: must be a number > 0"),
        (["policy", "set", "a", "-", "--timeout", "nan"], "got 'nan'"),
        (["policy", "list", "--timeout", "soon"], "got 'soon'"),
        (["policy", "delete"], "the following arguments are required: agent"),
        (["policy", "delete", "a", "b"], "unrecognized arguments: b"),
        (["schema", "--out", "/etc/passwd"], "'/etc/passwd' exists and is not a directory"),
        (["schema", "--out", "/nonexistent/dir/x"], "'/nonexistent/dir' does not exist"),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert named in usage_error(argv, capsys)


def test_policy_delete_checks_the_key_before_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    # An invalid key is told before any Kafka call.
    assert main(["policy", "delete", "x" * 257, "--timeout", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "invalid key: record key must be 1-256 characters" in err
    assert "Traceback" not in err


def test_schema_creates_only_the_last_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema", "--out", str(tmp_path / "schema")]) == 0
    assert sorted(p.name for p in (tmp_path / "schema").iterdir()) == [
        "agent-event.schema.json",
        "loop-episode.schema.json",
        "loop-verdict.schema.json",
    ]
    assert not (tmp_path / "a").exists()
    usage_error(["schema", "--out", str(tmp_path / "a" / "b")], capsys)
    assert not (tmp_path / "a").exists()


def test_schema_reports_a_directory_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    target = locked / "schema"
    code = main(["schema", "--out", str(target)])
    # root may write anyway; then the files are there and nothing went wrong
    if code == 0:
        assert (target / "loop-verdict.schema.json").is_file()
    else:
        assert code == 1
        err = capsys.readouterr().err
        assert f"cannot write to {target}" in err
        assert "Traceback" not in err


def test_demo_names_cover_the_app_id_and_every_topic() -> None:
    prefix = new_run_prefix()
    assert prefix.startswith(DEMO_PREFIX)
    assert prefix != new_run_prefix()
    settings = Settings.from_env(demo_names(prefix))
    topic_fields = [field for field in ENVIRONMENT if field.endswith("_topic")]
    assert len(topic_fields) >= 4
    defaults = Settings()
    for field in topic_fields:
        name = getattr(settings, field)
        assert name == f"{prefix}.{getattr(defaults, field)}"
    assert settings.app_id == prefix
    assert settings.changelog_topic.startswith(prefix)
