"""Issue 31's classes (docs/contract.md §9.9-): what the `extended` profile catches that
it missed, and where it no longer warns, driven through the pure core. Each scenario is
also checked against the re-scan reference (tests/support/reference_extended.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loopwatch.models import DetectionConfig
from loopwatch.streams.client.escalation import (
    LoopStopAdvised,
    escalation_action,
    stop_if_advised,
)
from loopwatch.streams.detector import SessionState, observe, observe_episodes
from tests.support import reference_extended
from tests.support.builders import SessionBuilder

EXTENDED = DetectionConfig(profile="extended")
SEED = DetectionConfig()
Outcome = tuple[str, tuple[str, ...], int] | None


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


def step(
    s: SessionBuilder, name: str, arguments: Any, result: Any = "ok", error: Any = None
) -> None:
    s.call(name, arguments)
    s.result(result=result, error=error)


def warned(got: list[Outcome]) -> list[Outcome]:
    return [o for o in got if o is not None]


# --- 3: results that differ only in volatile fields ----------------------------------


def test_results_differing_in_volatile_fields_are_the_same_result() -> None:
    s = SessionBuilder()
    s.user()
    for i in range(4):
        step(
            s,
            "get_status",
            {"job": 7},
            {"state": "pending", "durationMs": 10 + i, "runId": f"r{i}", "checkedAt": i,
             "log": f"checked at 2026-01-0{i + 1}T10:00:0{i}Z in {i}.{i}s, session "
                    f"{i}1b2c3d4-aaaa-bbbb-cccc-0123456789ab"},
        )  # fmt: skip
    got = outcomes(s)
    assert got[-1] == ("repeated_result", ("get_status",), 4)
    # the seed (and the §3 fingerprint) sees progress: only two of the keys are its own
    assert not any(o[0] == "repeated_result" for o in warned(outcomes(s, SEED)))


def test_a_real_change_in_a_result_is_still_progress() -> None:
    s = SessionBuilder()
    s.user()
    for i in range(4):
        step(s, "bash", {"cmd": "pytest"}, f"{4 - i} failed, {i} passed in 0.{i}s")
    assert warned(outcomes(s)) == []


# --- 2: the same call failing with an error that differs only in its details ---------


def test_errors_differing_in_a_counter_time_or_path_are_one_error() -> None:
    s = SessionBuilder()
    s.user()
    for i in range(4):
        error = f"timeout after {i + 3}000 ms at 10:00:0{i} (attempt {i}), in /tmp/r{i}/l"
        step(s, "fetch", {"url": "https://x"}, None, error)
    got = outcomes(s)
    assert got[-1] == ("repeated_result", ("fetch",), 4)  # rule 2 comes before rule 7
    assert warned(got) == [("repeated_batch", ("fetch",), 4), ("repeated_result", ("fetch",), 4)]
    assert not any(o[0] == "repeated_result" for o in warned(outcomes(s, SEED)))


# --- 14: per-tool result normalisation in the policy ---------------------------------


def test_a_policy_ignores_a_tools_own_keys_and_patterns() -> None:
    s = SessionBuilder()
    s.user()
    for i in range(4):
        step(s, "queue_depth", {"q": "jobs"}, {"depth": 5, "sampled": i, "note": f"epoch e{i}x"})
    plain = outcomes(s)
    assert warned(plain) == [] or all(o[0] != "repeated_result" for o in warned(plain))
    policy = DetectionConfig(
        profile="extended", result_ignore={"queue_depth": ("sampled", "re:epoch e[0-9]+x")}
    )
    assert outcomes(s, policy)[-1] == ("repeated_result", ("queue_depth",), 4)
    # another tool's keys are not touched
    other = DetectionConfig(profile="extended", result_ignore={"ls": ("sampled",)})
    assert all(o is None or o[0] != "repeated_result" for o in outcomes(s, other))


def test_volatile_results_can_be_switched_off() -> None:
    s = SessionBuilder()
    s.user()
    for i in range(4):
        step(s, "get_status", {"job": 7}, {"state": "pending", "elapsed": i})
    assert outcomes(s)[-1] == ("repeated_result", ("get_status",), 4)
    off = DetectionConfig(profile="extended", volatile_results=False)
    assert all(o is None or o[0] != "repeated_result" for o in outcomes(s, off))
    on_seed = DetectionConfig(volatile_results=True)
    assert outcomes(s, on_seed)[-1] == ("repeated_result", ("get_status",), 4)


# --- 1: the same tool failing with the same error while the arguments change ---------


def test_the_same_error_with_changing_arguments() -> None:
    s = SessionBuilder()
    s.user()
    for path in ("/etc/a.conf", "/etc/b.conf", "/var/c.conf", "/var/d"):
        step(s, "write_file", {"path": path, "text": "x"}, None, f"permission denied: {path}")
    got = outcomes(s)
    assert got[-1] == ("repeated_error", ("write_file",), 4)
    assert got[:-1] == [None] * (len(got) - 1)
    assert warned(outcomes(s, SEED)) == []  # every call differs: rule 1 never counts twice
    missing = SessionBuilder()
    for n in range(4):
        step(missing, "grep_code", {"q": f"x{n}"}, None, "Tool 'grep_code' does not exist.")
    assert outcomes(missing)[-1] == ("repeated_error", ("grep_code",), 4)


def test_another_error_or_a_success_ends_the_error_run() -> None:
    s = SessionBuilder()
    step(s, "write_file", {"path": "/a"}, None, "permission denied: /a")
    step(s, "write_file", {"path": "/b"}, None, "permission denied: /b")
    step(s, "write_file", {"path": "/c"}, None, "disk full")
    step(s, "write_file", {"path": "/d"}, None, "permission denied: /d")
    step(s, "write_file", {"path": "/tmp/e"}, "ok")
    step(s, "write_file", {"path": "/f"}, None, "permission denied: /f")
    step(s, "write_file", {"path": "/g"}, None, "permission denied: /g")
    step(s, "write_file", {"path": "/h"}, None, "permission denied: /h")
    assert warned(outcomes(s)) == []


# --- 8, 9, 11: retries that succeed, switching after errors, thresholds -------------


def test_a_retry_that_succeeds_is_not_warned() -> None:
    s = SessionBuilder()
    s.user()
    step(s, "bash", {"cmd": "curl x"}, None, "connection refused")
    step(s, "bash", {"cmd": "curl x"}, None, "connection refused")
    step(s, "bash", {"cmd": "curl x"}, "200 OK")
    assert warned(outcomes(s)) == []
    # the seed warns: rule 1 at the second failure, rule 4 at the third call
    assert outcomes(s, SEED)[4] == ("repeated_failed_mutation", ("bash",), 2)
    assert outcomes(s, SEED)[5] is not None  # and again at the third call, before its result


def test_switching_tools_after_three_errors_is_not_warned() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(3):
        step(s, "run_tests", {"suite": "all"}, None, "ImportError: no module named foo")
    step(s, "read_file", {"path": "setup.py"}, "...")
    step(s, "edit_file", {"path": "setup.py", "old": "a", "new": "b"}, "edited")
    assert warned(outcomes(s)) == []
    assert outcomes(s, SEED)[5] == ("repeated_batch", ("run_tests",), 3)
    # and with new arguments each time: the error-class rule waits for a fourth failure
    t = SessionBuilder()
    t.user()
    for n in range(3):
        step(t, "run_tests", {"suite": f"s{n}"}, None, "ImportError: no module named foo")
    step(t, "read_file", {"path": "setup.py"}, "...")
    assert warned(outcomes(t)) == []


def test_extended_waits_for_four_identical_results() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(4):
        step(s, "search", {"q": "x"}, "nothing found")
    got = outcomes(s)
    assert [o for o in got[:6] if o is not None] == []  # three calls, three results: quiet
    assert got[7] == ("repeated_batch", ("search",), 4)  # the fourth call, as it is issued
    assert got[8] == ("repeated_result", ("search",), 4)
    assert EXTENDED.threshold == 4 and EXTENDED.mutating_failure_threshold == 3
    assert DetectionConfig(profile="extended", threshold=3).threshold == 3


# --- 10: the same call once per user turn --------------------------------------------


def test_the_same_check_once_per_user_turn_is_new_intent() -> None:
    s = SessionBuilder()
    for _ in range(6):
        s.user("is the build green yet?")
        step(s, "get_build", {"id": 9}, "running")
    assert warned(outcomes(s)) == []
    assert "repeated_batch" in {o[0] for o in warned(outcomes(s, SEED))}
    # a system message is not new intent
    t = SessionBuilder()
    t.user()
    for _ in range(4):
        t.system("reminder")
        step(t, "get_build", {"id": 9}, "running")
    assert ("repeated_batch", ("get_build",), 4) in outcomes(t)


# --- 5: repeats that are not consecutive ---------------------------------------------


def test_the_same_call_and_result_again_with_other_calls_between() -> None:
    s = SessionBuilder()
    s.user()
    for n in range(4):
        step(s, "ls", {"dir": "src"}, "a.py b.py")
        step(s, "read_file", {"path": f"src/{n}.py"}, f"content {n}")
    got = outcomes(s)
    assert got[-3] == ("recurring_result", ("ls",), 4)
    assert got[:-3] == [None] * (len(got) - 3)
    assert warned(outcomes(s, SEED)) == []


def test_an_a_b_alternation_is_caught_at_its_third_pair() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(3):
        step(s, "ls", {"dir": "."}, "a b")
        step(s, "cat", {"path": "a"}, "hello")
    assert outcomes(s)[-1] == ("repeated_cycle", ("cat", "ls"), 3)


# --- 4, 6: a calls-only floor ---------------------------------------------------------


def test_polling_a_clock_is_caught_by_the_calls_only_floor() -> None:
    s = SessionBuilder()
    s.user()
    for n in range(5):
        step(s, "now", {}, f"tick {n * 7}")
    got = outcomes(s)
    assert got[9] == ("repeated_call", ("now",), 5)  # the fifth call, as it is issued
    assert got[:9] == [None] * 9
    assert warned(outcomes(s, SEED))[0] == ("repeated_batch", ("now",), 3)


def test_a_framework_refusal_alternating_with_a_reminder() -> None:
    s = SessionBuilder()
    s.user()
    refusal = "You already called this tool with these arguments."
    for n in range(5):
        text = refusal if n % 2 == 0 else refusal + f"\n<reminder>step {n} of the plan</reminder>"
        step(s, "open_page", {"url": "https://x"}, text)
    got = outcomes(s)
    assert ("repeated_call", ("open_page",), 5) in got


# --- 12, 13: escalation levels and warning once per streak ---------------------------


def _warnings(s: SessionBuilder, config: DetectionConfig) -> list[Any]:
    state: SessionState | None = None
    out = []
    for event in s.events:
        state, verdict = observe(state, event, config)
        assert verdict is not None
        out.append(verdict.warning)
    return out


def _looping(repeats: int) -> SessionBuilder:
    s = SessionBuilder()
    s.user()
    for _ in range(repeats):
        s.call("read_file", {"path": "a"})
        s.result(result="same")
    return s


def test_a_warning_escalates_with_the_model_calls_that_saw_it() -> None:
    got = _warnings(_looping(8), EXTENDED)
    levels = [(e.seq, w.level) for e, w in zip(_looping(8).events, got, strict=True) if w]
    # rule 4' warns at the 4th call (seq 7): level 1; each assistant message after it saw
    # the warning; two of them without a change insist, four advise stopping
    assert levels[0] == (7, 1)
    assert dict(levels)[11] == 2 and dict(levels)[15] == 3
    assert [lv for _, lv in levels] == sorted(lv for _, lv in levels)  # never goes down
    stop = next(w for w in got if w is not None and w.level == 3)
    assert stop.message.endswith("The run may be stopped.")
    # the seed has no levels: its bytes stay §5's
    assert all(w is None or w.level is None for w in _warnings(_looping(8), SEED))
    assert b'"level"' not in b"".join(
        v.to_json() for v in _verdicts(_looping(8), SEED) if v.warning is not None
    )


def _verdicts(s: SessionBuilder, config: DetectionConfig) -> list[Any]:
    state: SessionState | None = None
    out = []
    for event in s.events:
        state, verdict = observe(state, event, config)
        out.append(verdict)
    return out


def test_warn_once_shows_a_loop_at_its_start_and_when_its_level_rises() -> None:
    once = DetectionConfig(profile="extended", warn_once=True)
    got = [w for w in _warnings(_looping(8), once) if w is not None]
    # rule 4' at the 4th call, rule 2 at its result (its own loop), then rule 2 again
    # only when its level rises (the verdicts between carry no warning)
    assert [(w.rule, w.level) for w in got] == [
        ("repeated_batch", 1),
        ("repeated_result", 1),
        ("repeated_result", 2),
        ("repeated_result", 3),
    ]
    quiet = DetectionConfig(profile="extended", warn_once=True, escalation=False)
    assert len([w for w in _warnings(_looping(8), quiet) if w is not None]) == 2
    # episodes still count every match (the loop goes on, shown or not)
    state = None
    closed = []
    for event in _looping(8).events:
        observation = observe_episodes(state, event, quiet)
        state = observation.state
        closed.extend(observation.closed)
    assert state is not None and {e.rule for e in state.episodes} == {
        "repeated_batch",
        "repeated_result",
    }


def test_the_client_helper_stops_only_at_level_three() -> None:
    warnings = [w for w in _warnings(_looping(8), EXTENDED) if w is not None]
    assert {escalation_action(w) for w in warnings} == {"warn", "insist", "stop"}
    assert stop_if_advised([w for w in warnings if w.level != 3]) is None
    with pytest.raises(LoopStopAdvised, match="stop advised: repeated_"):
        stop_if_advised(warnings)
    seen: list[Any] = []
    assert stop_if_advised(warnings, on_stop=seen.append) is seen[0]
    seed_warnings = [w for w in _warnings(_looping(8), SEED) if w is not None]
    assert {escalation_action(w) for w in seed_warnings} == {"warn"}


def test_levels_and_warn_once_survive_snapshot_round_trips() -> None:
    once = DetectionConfig(profile="extended", warn_once=True)
    state: SessionState | None = None
    got = []
    for event in _looping(8).events:
        state, verdict = observe(state, event, once)
        assert verdict is not None
        got.append(verdict.warning)
        if state is not None:
            snapshot = json.loads(json.dumps(state.to_snapshot()))
            state = SessionState.from_snapshot(snapshot)
    assert got == _warnings(_looping(8), once)
    # a seed session's snapshot keeps the pre-issue-31 keys until a model call saw a warning
    seed_state: SessionState | None = None
    for event in _looping(3).events:
        seed_state, _ = observe(seed_state, event, SEED)
    assert seed_state is not None and "episode_calls" not in seed_state.to_snapshot()
