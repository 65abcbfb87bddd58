"""Issue 31, class 7: loops of the conversation rather than of tools (docs/contract.md
§9.14 `repeated_message`, §9.15 `repeated_condensation`), driven through the pure core
and each scenario checked against the re-scan reference
(tests/support/reference_extended.py)."""

from __future__ import annotations

import hashlib
import json

import pytest

from loopwatch.models import (
    AssistantMessage,
    DetectionConfig,
    InvalidEvent,
    decode_event,
    parse_policy,
    text_fingerprint,
)
from loopwatch.streams.detector import SessionState, observe
from loopwatch.streams.detector.rules.repeated_message import text_digest
from loopwatch.streams.detector.tools import fingerprint_digest
from loopwatch.streams.settings import Settings, SettingsError
from tests.support import reference_extended
from tests.support.builders import SessionBuilder

EXTENDED = DetectionConfig(profile="extended")
SEED = DetectionConfig()
Outcome = tuple[str, tuple[str, ...], int] | None
SAID = "I will look into the failing test next."


def outcomes(s: SessionBuilder, config: DetectionConfig = EXTENDED) -> list[Outcome]:
    state: SessionState | None = None
    replay = reference_extended.ReplaySession(config)
    out: list[Outcome] = []
    for event in s.events:
        state, verdict = observe(state, event, config)
        assert verdict is not None
        _, expected = replay.feed(event)
        w = verdict.warning
        got = None if w is None else (w.rule, tuple(w.tool_names), w.count)
        want = None if expected is None else (expected.rule, expected.tool_names, expected.count)
        assert got == want, f"seq {event.seq}: core {got} != reference {want}"
        out.append(got)
    return out


def final_state(s: SessionBuilder, config: DetectionConfig = EXTENDED) -> SessionState:
    state: SessionState | None = None
    for event in s.events:
        state, _ = observe(state, event, config)
    assert state is not None
    return state


# --- 7a: the same text message again and again -----------------------------------------


def test_the_same_message_three_times_in_a_row_is_a_loop() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(4):
        s.text(SAID)
    assert outcomes(s) == [
        None,
        None,
        None,
        ("repeated_message", (), 3),
        ("repeated_message", (), 4),
    ]
    assert all(o is None for o in outcomes(s, SEED))  # the seed stays SPEC's


def test_a_tool_call_between_the_repeats_breaks_the_streak() -> None:
    s = SessionBuilder()
    s.user()
    s.text(SAID)
    s.text(SAID)
    s.call("run_tests", {"path": "tests"})
    s.result(result="1 failed")
    s.text(SAID)
    s.text(SAID)
    assert all(o is None for o in outcomes(s))
    s.text(SAID)  # a third in a row after the tool step
    assert outcomes(s)[-1] == ("repeated_message", (), 3)


def test_a_user_message_is_new_intent_a_system_message_is_not() -> None:
    s = SessionBuilder()
    s.user()
    s.text(SAID)
    s.text(SAID)
    s.user("and now?")
    s.text(SAID)
    s.text(SAID)
    assert all(o is None for o in outcomes(s))
    s.system("reminder: use a tool")
    s.text(SAID)
    assert outcomes(s)[-1] == ("repeated_message", (), 3)


def test_only_the_same_text_counts_up_to_normalisation() -> None:
    s = SessionBuilder()
    s.user()
    s.text(SAID)
    s.text("Something else entirely.")
    s.text(SAID)
    s.text(SAID)
    assert all(o is None for o in outcomes(s))
    s.text(f"  {SAID}  \r\n")  # §3's string normalisation: the same message
    assert outcomes(s)[-1] == ("repeated_message", (), 3)


def test_a_carried_text_fingerprint_equals_the_text_it_digests() -> None:
    s = SessionBuilder()
    s.user()
    s.text(SAID)
    s._emit({"type": "assistant_message", "text_fingerprint": text_fingerprint(SAID)})
    s.text(SAID)
    assert outcomes(s)[-1] == ("repeated_message", (), 3)


def test_a_text_step_without_its_text_equals_nothing() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(4):
        s._emit({"type": "assistant_message"})
    assert all(o is None for o in outcomes(s))


def test_the_message_threshold_is_a_setting() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(5):
        s.text(SAID)
    got = outcomes(s, DetectionConfig(profile="extended", message_threshold=5))
    assert got[-2:] == [None, ("repeated_message", (), 5)]
    off = DetectionConfig(profile="extended", rules={"repeated_message": False})
    assert all(o is None for o in outcomes(s, off))


def test_the_state_keeps_a_digest_not_the_text() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(3):
        s.text(SAID)
    snapshot = json.dumps(final_state(s).to_snapshot())
    assert "failing test" not in snapshot
    restored = SessionState.from_snapshot(json.loads(snapshot))
    _, verdict = observe(restored, s.text(SAID), EXTENDED)
    assert verdict is not None and verdict.warning is not None
    assert (verdict.warning.rule, verdict.warning.count) == ("repeated_message", 4)


def test_a_repeated_message_escalates_like_any_loop() -> None:
    s = SessionBuilder()
    s.user()
    levels = []
    state: SessionState | None = None
    for _ in range(8):
        state, verdict = observe(state, s.text(SAID), EXTENDED)
        assert verdict is not None
        levels.append(None if verdict.warning is None else verdict.warning.level)
    # each repeat is a model call that saw the warning: 2 per level (escalate_after)
    assert levels == [None, None, 1, 1, 2, 2, 3, 3]


# --- 7b: the history condensed again and again -----------------------------------------


def test_three_condensations_without_a_step_between_are_a_loop() -> None:
    s = SessionBuilder()
    s.user()
    s.condensed()
    s.condensed()
    s.condensed()
    assert outcomes(s)[-3:] == [None, None, ("repeated_condensation", (), 3)]
    assert all(o is None for o in outcomes(s, SEED))


def test_a_model_turn_between_condensations_is_progress() -> None:
    s = SessionBuilder()
    s.user()
    s.condensed()
    s.condensed()
    s.text("Summary read; continuing.")
    s.condensed()
    s.condensed()
    s.call("ls", {"dir": "."})
    s.condensed()
    s.result(result="a b")
    s.condensed()
    assert all(o is None for o in outcomes(s))
    s.system("context was trimmed")  # not a model turn
    s.condensed()
    assert outcomes(s)[-1] == ("repeated_condensation", (), 3)


def test_a_user_message_ends_a_run_of_condensations() -> None:
    s = SessionBuilder()
    s.user()
    s.condensed()
    s.condensed()
    s.user("try again")
    s.condensed()
    s.condensed()
    assert all(o is None for o in outcomes(s))


def test_the_condensation_threshold_is_a_setting() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(4):
        s.condensed()
    config = DetectionConfig(profile="extended", condensation_threshold=4)
    assert outcomes(s, config)[-2:] == [None, ("repeated_condensation", (), 4)]


def test_a_condensation_changes_no_tool_rule() -> None:
    # Not a boundary and not a step: a tool loop goes on through it.
    s = SessionBuilder()
    s.user()
    for _ in range(3):
        s.call("get_status", {"job": 1})
        s.result(result="pending")
        s.condensed()
    s.call("get_status", {"job": 1})
    s.result(result="pending")
    assert outcomes(s)[-1] == ("repeated_result", ("get_status",), 4)
    assert outcomes(s, SEED)[-1] == ("repeated_result", ("get_status",), 4)


# --- the contract: an additive event type (1.3) ----------------------------------------


def _record(**body: object) -> bytes:
    return json.dumps({"session_id": "s", "seq": 1, "ts": "2026-01-01T00:00:00Z", **body}).encode()


def test_context_condensed_is_an_event_and_the_old_types_are_unchanged() -> None:
    event = decode_event(_record(type="context_condensed", agent_id="a"))
    assert event.type == "context_condensed" and event.agent_id == "a"
    said = decode_event(_record(type="assistant_message", text="hi"))
    assert said.type == "assistant_message" and said.text_fingerprint is None
    with pytest.raises(InvalidEvent, match="schema"):
        decode_event(_record(type="context_compacted"))
    with pytest.raises(InvalidEvent, match="text_fingerprint"):
        decode_event(_record(type="assistant_message", text_fingerprint="md5:abc"))


def test_the_text_fingerprint_is_section_3s_digest_of_the_normalised_text() -> None:
    expected = "sha256:" + hashlib.sha256(b'{"text":"a b"}').hexdigest()
    assert text_fingerprint("  a b \r\n") == expected
    assert text_fingerprint("ü") == "sha256:" + hashlib.sha256('{"text":"ü"}'.encode()).hexdigest()


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        "  two\nlines  ",
        "trailing \nspace",
        "tab\t\nend",
        "crlf\r\nand cr\rend",
        "unicode space\u2003\nand\u00a0",
        "separators\x1c\n\x1f\nend",
        'quotes " and \\ and \u0000 and ü 漢字',
        "\n\n",
        "",
    ],
)
def test_the_rules_text_digest_is_the_text_fingerprints(text: str) -> None:
    event = decode_event(_record(type="assistant_message", text=text))
    assert isinstance(event, AssistantMessage)
    assert text_digest(event) == fingerprint_digest(text_fingerprint(text))


def test_policy_records_and_settings_take_the_new_thresholds_and_switches() -> None:
    record = b'{"version": 1, "profile": "extended", "message_threshold": 5,'
    record += b' "rules": {"repeated_condensation": false}}'
    config = parse_policy("*", record).config
    assert config.message_threshold == 5
    assert "repeated_condensation" not in config.enabled_rules
    settings = Settings.from_env(
        {
            "LOOPWATCH_PROFILE": "extended",
            "LOOPWATCH_CONDENSATION_THRESHOLD": "6",
            "LOOPWATCH_RULE_REPEATED_MESSAGE": "off",
        }
    )
    assert settings.detection.condensation_threshold == 6
    assert "repeated_message" not in settings.detection.enabled_rules
    with pytest.raises(SettingsError, match="LOOPWATCH_MESSAGE_THRESHOLD"):
        Settings.from_env({"LOOPWATCH_MESSAGE_THRESHOLD": "0"})
    assert "repeated_message" not in DetectionConfig().enabled_rules  # seed: SPEC's four
