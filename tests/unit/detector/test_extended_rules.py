"""Rules 5 and 6 and result-aware batches (docs/contract.md §9.2-§9.4) on the scenarios
of issue 13, driven through the pure core with the `extended` profile."""

from __future__ import annotations

from typing import Any

from loopwatch.models import DetectionConfig
from loopwatch.streams.detector import SessionState, observe
from tests.support.builders import SessionBuilder

EXTENDED = DetectionConfig(
    profile="extended",
    threshold=3,
    mutating_failure_threshold=2,
    rules={"repeated_error": False, "recurring_result": False, "repeated_call": False},
    volatile_results=False,
)
"""Issue 13's `extended`: rules 5, 6 and 4' at the seed's thresholds, without issue 31's
rules and defaults (tests/unit/detector/test_issue31_rules.py has those)."""
Outcome = tuple[str, tuple[str, ...], int] | None


def outcomes(s: SessionBuilder, config: DetectionConfig = EXTENDED) -> list[Outcome]:
    state: SessionState | None = None
    out: list[Outcome] = []
    for event in s.events:
        state, verdict = observe(state, event, config)
        assert verdict is not None
        w = verdict.warning
        out.append(None if w is None else (w.rule, w.tool_names, w.count))
    return out


def step(s: SessionBuilder, name: str, arguments: Any, result: Any = "ok") -> None:
    s.call(name, arguments)
    s.result(result=result)


def test_a_two_step_cycle_warns_once_repeated_three_times() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(3):
        step(s, "ls", {"dir": "."}, "file1.txt")
        step(s, "read_file", {"path": "file1.txt"}, "hello")
    got = outcomes(s)
    assert got[-1] == ("repeated_cycle", ("ls", "read_file"), 3)
    assert got[:-1] == [None] * (len(got) - 1)  # the third repetition completes last
    assert outcomes(s, DetectionConfig()) == [None] * len(got)  # the seed sees nothing


def test_a_three_file_round_and_an_edit_test_cycle() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(3):
        for name in ("a", "b", "c"):
            step(s, "read_file", {"path": name}, f"content of {name}")
    assert outcomes(s)[-1] == ("repeated_cycle", ("read_file",), 3)
    t = SessionBuilder()
    t.user()
    for _ in range(3):
        step(t, "edit_file", {"path": "x.py", "old": "a", "new": "b"}, "edited")
        step(t, "bash", {"cmd": "pytest"}, "1 failed")
    assert outcomes(t)[-1] == ("repeated_cycle", ("bash", "edit_file"), 3)


def test_a_cycle_whose_results_change_is_progress() -> None:
    s = SessionBuilder()
    s.user()
    for n in range(4):
        step(s, "edit_file", {"path": "x.py", "old": "a", "new": "b"}, "edited")
        step(s, "bash", {"cmd": "pytest"}, f"{3 - n} failed")
    assert outcomes(s) == [None] * len(s.events)


def test_boundaries_reset_the_cycle_text_steps_do_not_abandoned_steps_do() -> None:
    def two_rounds(s: SessionBuilder) -> None:
        for _ in range(2):
            step(s, "ls", {}, "x")
            step(s, "read_file", {"path": "x"}, "y")

    with_user = SessionBuilder()
    two_rounds(with_user)
    with_user.user()
    two_rounds(with_user)
    assert outcomes(with_user)[-1] is None
    with_text = SessionBuilder()
    two_rounds(with_text)
    with_text.text()
    step(with_text, "ls", {}, "x")
    step(with_text, "read_file", {"path": "x"}, "y")
    assert outcomes(with_text)[-1] == ("repeated_cycle", ("ls", "read_file"), 3)
    abandoned = SessionBuilder()
    two_rounds(abandoned)
    abandoned.call("ls", {})  # never answered
    step(abandoned, "ls", {}, "x")
    step(abandoned, "read_file", {"path": "x"}, "y")
    assert outcomes(abandoned)[-1] is None


def test_three_identical_calls_in_one_message() -> None:
    s = SessionBuilder()
    s.step(("search", {"q": "x"}), ("search", {"q": "x"}), ("search", {"q": "x"}))
    for _ in range(3):
        s.result(result="r", call_id=None)
    got = outcomes(s)
    assert got[0] == ("repeated_call_in_turn", ("search",), 3)
    assert got[1:3] == [("repeated_call_in_turn", ("search",), 3)] * 2
    assert got[3] == ("repeated_result", ("search",), 3)  # rule 2 comes first
    s.user()
    assert outcomes(s)[-1] is None  # a boundary resets it
    two = SessionBuilder()
    two.step(("search", {"q": "x"}), ("search", {"q": "x"}), ("search", {"q": "y"}))
    assert outcomes(two) == [None]


def test_result_aware_batches_warn_only_when_the_outcomes_repeat() -> None:
    same = SessionBuilder()
    changing = SessionBuilder()
    for n in range(4):
        step(same, "bash", {"cmd": "make"}, "error at line 3")
        step(changing, "bash", {"cmd": "make"}, f"error at line {n}")
    assert ("repeated_batch", ("bash",), 3) in outcomes(same)
    assert outcomes(changing) == [None] * len(changing.events)
    # The seed counts the calls only.
    assert ("repeated_batch", ("bash",), 3) in outcomes(changing, DetectionConfig())


def test_exempt_tools_and_per_tool_thresholds_in_a_policy() -> None:
    s = SessionBuilder()
    for _ in range(5):
        step(s, "get_job_status", {"id": 1}, "running")
    assert outcomes(s)[-1] == ("repeated_result", ("get_job_status",), 5)
    exempt = DetectionConfig(**{**EXTENDED.model_dump(), "exempt_tools": ["get_job_status"]})
    assert outcomes(s, exempt) == [None] * len(s.events)
    own = DetectionConfig(**{**EXTENDED.model_dump(), "tool_thresholds": {"get_job_status": 5}})
    got = outcomes(s, own)
    assert got[-2:] == [
        ("repeated_batch", ("get_job_status",), 5),  # the fifth call, as it is issued
        ("repeated_result", ("get_job_status",), 5),
    ]
    assert got[:-2] == [None] * (len(got) - 2)
