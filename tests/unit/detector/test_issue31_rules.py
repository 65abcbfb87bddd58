"""Issue 31's classes (docs/contract.md §9.9-): what the `extended` profile catches that
it missed, and where it no longer warns, driven through the pure core. Each scenario is
also checked against the re-scan reference (tests/support/reference_extended.py)."""

from __future__ import annotations

from typing import Any

from loopwatch.models import DetectionConfig
from loopwatch.streams.detector import SessionState, observe
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
    assert ("repeated_result", ("get_status",), 3) in got
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
    for i in range(3):
        error = f"timeout after {i + 3}000 ms at 10:00:0{i} (attempt {i}), in /tmp/r{i}/l"
        step(s, "fetch", {"url": "https://x"}, None, error)
    got = outcomes(s)
    assert got[-1] == ("repeated_result", ("fetch",), 3)
    assert not any(o[0] == "repeated_result" for o in warned(outcomes(s, SEED)))


# --- 14: per-tool result normalisation in the policy ---------------------------------


def test_a_policy_ignores_a_tools_own_keys_and_patterns() -> None:
    s = SessionBuilder()
    s.user()
    for i in range(3):
        step(s, "queue_depth", {"q": "jobs"}, {"depth": 5, "sampled": i, "note": f"epoch e{i}x"})
    plain = outcomes(s)
    assert warned(plain) == [] or all(o[0] != "repeated_result" for o in warned(plain))
    policy = DetectionConfig(
        profile="extended", result_ignore={"queue_depth": ("sampled", "re:epoch e[0-9]+x")}
    )
    assert outcomes(s, policy)[-1] == ("repeated_result", ("queue_depth",), 3)
    # another tool's keys are not touched
    other = DetectionConfig(profile="extended", result_ignore={"ls": ("sampled",)})
    assert all(o is None or o[0] != "repeated_result" for o in outcomes(s, other))


def test_volatile_results_can_be_switched_off() -> None:
    s = SessionBuilder()
    s.user()
    for i in range(3):
        step(s, "get_status", {"job": 7}, {"state": "pending", "elapsed": i})
    assert outcomes(s)[-1] == ("repeated_result", ("get_status",), 3)
    off = DetectionConfig(profile="extended", volatile_results=False)
    assert all(o is None or o[0] != "repeated_result" for o in outcomes(s, off))
    on_seed = DetectionConfig(volatile_results=True)
    assert outcomes(s, on_seed)[-1] == ("repeated_result", ("get_status",), 3)
