"""Profiles, policy records and the verdict's policy field (docs/contract.md §9.5-§9.8),
without a broker: validation naming the field, the fold of records, seed bytes."""

from __future__ import annotations

import io
import json

import pytest

from loopwatch.models import (
    ALL_RULES,
    RULES,
    DetectionConfig,
    InvalidPolicy,
    LoopVerdict,
    PolicyRef,
    parse_policy,
)
from loopwatch.streams.commands.scan import scan_lines
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.settings import Settings, SettingsError
from loopwatch.streams.worker.policy_book import PolicyBook
from tests.support.builders import SessionBuilder


def test_profiles_enable_their_rules_and_switches_override() -> None:
    assert DetectionConfig().enabled_rules == RULES
    assert DetectionConfig().is_seed and not DetectionConfig().batches_compare_results
    extended = DetectionConfig(profile="extended")
    assert extended.enabled_rules == ALL_RULES and extended.batches_compare_results
    assert not extended.is_seed
    mixed = DetectionConfig(rules={"repeated_cycle": True, "repeated_batch": False})
    assert mixed.enabled_rules == (
        "repeated_failed_mutation",
        "repeated_result",
        "repeated_read_range",
        "repeated_cycle",
    )
    assert not DetectionConfig(result_aware_batches=True).is_seed
    assert not DetectionConfig(exempt_tools=["x"]).is_seed


def test_exempt_tools_and_per_tool_thresholds() -> None:
    config = DetectionConfig(exempt_tools=["poll"], tool_thresholds={"wait": 9, "bash": 4})
    assert config.threshold_for("repeated_result", ("poll",)) is None
    assert config.threshold_for("repeated_batch", ("poll", "bash")) == 3  # not all exempt
    assert config.threshold_for("repeated_failed_mutation", ("bash",)) == 4
    assert config.threshold_for("repeated_batch", ("bash", "wait")) == 9  # the largest
    assert config.threshold_for("repeated_failed_mutation", ("edit_file",)) == 2


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (b"\xff", "record is not UTF-8"),
        (b"{nope", "record is not JSON"),
        (b"[]", "record must be a JSON object"),
        (b"{}", "version is required (an integer >= 1)"),
        (b'{"version": true}', "version must be an integer >= 1, got True"),
        (b'{"version": 1, "v": 2}', "v must be 1, got 2"),
        (b'{"version": 1, "profile": "max"}', "profile must be one of seed, extended, got 'max'"),
        (b'{"version": 1, "cycle_threshold": 2.0}', "cycle_threshold must be an integer >= 1"),
        (b'{"version": 1, "rules": {"repeated_loop": true}}', "rules: unknown rule"),
        (b'{"version": 1, "rules": {"repeated_cycle": 1}}', "repeated_cycle must be true or"),
        (b'{"version": 1, "exempt_tools": "bash"}', "exempt_tools must be a list"),
        (b'{"version": 1, "exempt_tools": [""]}', "tool names must be 1-256 characters"),
        (b'{"version": 1, "tool_thresholds": {"bash": 0}}', "bash must be an integer >= 1"),
        (b'{"version": 1, "result_aware_batches": "yes"}', "result_aware_batches must be"),
        (b'{"version": 1, "thresold": 3}', "unknown config key 'thresold'"),
    ],
)
def test_invalid_records_name_the_problem(record: bytes, message: str) -> None:
    with pytest.raises(InvalidPolicy) as raised:
        parse_policy("agent", record)
    assert message in str(raised.value)


def test_a_record_round_trips_and_is_complete_by_itself() -> None:
    policy = parse_policy(b"agent", b'{"version": 3, "profile": "extended", "threshold": 5}')
    assert (policy.key, policy.version, policy.config.threshold) == ("agent", 3, 5)
    assert policy.config.mutating_failure_threshold == 3  # extended's default, not a setting
    assert json.loads(policy.to_json()) == {
        "v": 1,
        "version": 3,
        "profile": "extended",
        "threshold": 5,
    }
    assert parse_policy("agent", policy.to_json()) == policy
    with pytest.raises(InvalidPolicy, match="record key"):
        parse_policy(b"\xff", b'{"version": 1}')
    with pytest.raises(InvalidPolicy, match="no key"):
        parse_policy(None, b'{"version": 1}')


def test_the_book_folds_records_and_keeps_the_previous_policy_on_a_bad_one() -> None:
    builtin = DetectionConfig(threshold=4)
    book = PolicyBook(builtin)
    assert book.judge("a") == (builtin, None)
    book.apply(b"*", b'{"version": 1, "profile": "extended"}')
    book.apply(b"a", b'{"version": 7}')
    assert book.judge("a")[1] == PolicyRef(key="a", version=7)
    assert book.judge("b")[1] == PolicyRef(key="*", version=1)
    assert book.judge(None)[1] == PolicyRef(key="*", version=1)
    with pytest.raises(InvalidPolicy):
        book.apply(b"a", b'{"version": 8, "threshold": -1}')
    assert book.judge("a")[1] == PolicyRef(key="a", version=7)
    book.apply(b"a", None)  # a tombstone: back to the fleet default
    assert book.judge("a")[1] == PolicyRef(key="*", version=1)
    book.apply(b"*", None)
    assert book.judge("a") == (builtin, None)
    assert book.policies() == []


def test_a_verdict_without_a_policy_has_no_policy_field() -> None:
    s = SessionBuilder()
    event = s.user()
    fields = {"session_id": "s1", "seq": 0, "agent_id": None, "event_ts": event.ts}
    plain = LoopVerdict(**fields, evaluated_at=event.ts, warning=None)
    assert b"policy" not in plain.to_json()
    assert "policy" not in plain.model_dump(mode="json")
    judged = plain.model_copy(update={"policy": PolicyRef(key="*", version=2)})
    assert json.loads(judged.to_json())["policy"] == {"key": "*", "version": 2}
    assert list(json.loads(judged.to_json()))[-1] == "policy"


def test_scan_with_a_policy_names_it_in_every_verdict() -> None:
    s = SessionBuilder()
    s.step(("search", {"q": "x"}), ("search", {"q": "x"}), ("search", {"q": "x"}))
    source = io.BytesIO(b"".join(e.model_dump_json().encode() + b"\n" for e in s.events))
    out = io.BytesIO()
    policy = parse_policy("*", b'{"version": 2, "profile": "extended"}')
    scan_lines(source, out, Scanner(policy.config, policy=policy.ref))
    [verdict] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert verdict["policy"] == {"key": "*", "version": 2}
    assert verdict["warning"]["rule"] == "repeated_call_in_turn"
    source.seek(0)
    seed = io.BytesIO()
    scan_lines(source, seed, Scanner(DetectionConfig()))
    assert json.loads(seed.getvalue())["warning"] is None
    assert b"policy" not in seed.getvalue()


def test_settings_build_the_builtin_policy() -> None:
    settings = Settings.from_env(
        {
            "LOOPWATCH_PROFILE": "extended",
            "LOOPWATCH_CYCLE_THRESHOLD": "4",
            "LOOPWATCH_RULE_REPEATED_CALL_IN_TURN": "off",
            "LOOPWATCH_RESULT_AWARE_BATCHES": "false",
        }
    )
    config = settings.detection
    assert config.cycle_threshold == 4 and not config.batches_compare_results
    assert "repeated_call_in_turn" not in config.enabled_rules
    assert "repeated_cycle" in config.enabled_rules
    assert Settings.from_env({}).detection == DetectionConfig()
    assert Settings.from_env({}).config_topic == "loopwatch-config"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("LOOPWATCH_PROFILE", "strict", "LOOPWATCH_PROFILE must be one of seed, extended"),
        ("LOOPWATCH_CYCLE_THRESHOLD", "0", "LOOPWATCH_CYCLE_THRESHOLD must be an integer >= 1"),
        ("LOOPWATCH_RULE_REPEATED_CYCLE", "yes", "LOOPWATCH_RULE_REPEATED_CYCLE must be on or off"),
        ("LOOPWATCH_RESULT_AWARE_BATCHES", "1", "LOOPWATCH_RESULT_AWARE_BATCHES must be true or"),
        ("LOOPWATCH_CONFIG_TOPIC", "a b", "LOOPWATCH_CONFIG_TOPIC must be 1-200 characters"),
    ],
)
def test_bad_settings_name_the_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({variable: value})
    assert message in str(raised.value)
