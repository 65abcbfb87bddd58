"""Every rule and edge of docs/contract.md §4, driven through the pure core."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from loopwatch.models import AgentEvent, DetectionConfig, call_fingerprint, result_fingerprint
from loopwatch.streams.detector import SessionState, observe
from tests.support.builders import SessionBuilder

DEFAULT = DetectionConfig()
Outcome = tuple[str, tuple[str, ...], int] | None


def outcomes(events: Iterable[AgentEvent], config: DetectionConfig = DEFAULT) -> list[Outcome]:
    """(rule, tool_names, count) or None for each processed event; "skipped" entries are
    omitted, exactly like missing verdicts."""
    state: SessionState | None = None
    out: list[Outcome] = []
    for event in events:
        state, verdict = observe(state, event, config)
        if verdict is None:
            continue
        w = verdict.warning
        out.append(None if w is None else (w.rule, w.tool_names, w.count))
    return out


def last(s: SessionBuilder, config: DetectionConfig = DEFAULT) -> Outcome:
    return outcomes(s.events, config)[-1]


# ---- rule 1: repeated_failed_mutation ------------------------------------------------


def failed_edit(s: SessionBuilder, error: str = "no match for old_string") -> None:
    s.call("edit_file", {"path": "a.py", "old": "x", "new": "y"})
    s.result(result=None, error=error)


def test_rule1_matches_on_the_second_identical_failed_mutation() -> None:
    s = SessionBuilder()
    s.user()
    failed_edit(s)
    assert last(s) is None
    failed_edit(s)
    assert last(s) == ("repeated_failed_mutation", ("edit_file",), 2)


def test_rule1_counts_beyond_the_threshold_warn_again() -> None:
    s = SessionBuilder()
    for _ in range(4):
        failed_edit(s)
    results = [
        o for o, e in zip(outcomes(s.events), s.events, strict=True) if e.type == "tool_result"
    ]
    assert results == [
        None,
        ("repeated_failed_mutation", ("edit_file",), 2),
        ("repeated_failed_mutation", ("edit_file",), 3),
        ("repeated_failed_mutation", ("edit_file",), 4),
    ]


@pytest.mark.parametrize(
    ("tool", "mutating"),
    [
        ("edit_file", True),
        ("write_file", True),
        ("delete_file", True),
        ("bash", True),
        ("fs__write_file", True),
        ("shell__bash", True),
        ("mywrite_file", False),
        ("fs_write_file", False),
        ("bash_history", False),
        ("search", False),
    ],
)
def test_rule1_applies_only_to_mutating_tools(tool: str, mutating: bool) -> None:
    s = SessionBuilder()
    for _ in range(2):
        s.call(tool, {"x": 1})
        s.result(result=None, error="boom")
    expected = ("repeated_failed_mutation", (tool,), 2) if mutating else None
    assert last(s) == expected


def test_rule1_error_text_is_normalised_but_different_errors_end_the_run() -> None:
    s = SessionBuilder()
    failed_edit(s, "line one  \r\nline two\n")
    failed_edit(s, "line one\nline two")
    assert last(s) == ("repeated_failed_mutation", ("edit_file",), 2)
    failed_edit(s, "another error")
    # rule 1 no longer matches; the repeated edit call itself is rule 4's business
    assert last(s) == ("repeated_batch", ("edit_file",), 3)


def test_rule1_assistant_messages_in_between_do_not_break_the_run() -> None:
    s = SessionBuilder()
    failed_edit(s)
    s.text("let me retry")
    failed_edit(s)
    assert last(s) == ("repeated_failed_mutation", ("edit_file",), 2)
    # The rules read the whole history: the next assistant message still sees the run.
    s.text("hmm")
    assert last(s) == ("repeated_failed_mutation", ("edit_file",), 2)


def test_rule1_a_boundary_starts_the_results_afresh() -> None:
    s = SessionBuilder()
    failed_edit(s)
    s.user("try again")
    failed_edit(s)
    assert last(s) is None
    s2 = SessionBuilder()
    failed_edit(s2)
    s2.system("reminder")
    failed_edit(s2)
    assert last(s2) is None


def test_rule1_needs_a_failed_newest_result() -> None:
    s = SessionBuilder()
    failed_edit(s)
    failed_edit(s)
    s.call("edit_file", {"path": "a.py", "old": "x", "new": "z"})
    s.result(result="ok")
    assert last(s) is None


def test_rule1_comes_before_rule2() -> None:
    s = SessionBuilder()
    for _ in range(3):
        failed_edit(s)
    assert last(s) == ("repeated_failed_mutation", ("edit_file",), 3)


def test_rule1_threshold_is_configurable() -> None:
    s = SessionBuilder()
    failed_edit(s)
    assert last(s, DetectionConfig(mutating_failure_threshold=1)) == (
        "repeated_failed_mutation",
        ("edit_file",),
        1,
    )
    failed_edit(s)
    assert last(s, DetectionConfig(mutating_failure_threshold=3)) is None


# ---- rule 2: repeated_result ---------------------------------------------------------


def search(s: SessionBuilder, query: str = "q", result: object = "nothing found") -> None:
    s.call("search", {"query": query})
    s.result(result=result)


def test_rule2_matches_at_the_threshold_for_any_tool() -> None:
    s = SessionBuilder()
    search(s)
    search(s)
    assert last(s) is None
    search(s)
    assert last(s) == ("repeated_result", ("search",), 3)


def test_rule2_failed_non_mutating_results_count_too() -> None:
    s = SessionBuilder()
    for _ in range(3):
        s.call("read_file", {"path": "missing.py"})
        s.result(result=None, error="not found")
    assert last(s) == ("repeated_result", ("read_file",), 3)


def test_rule2_volatile_result_keys_do_not_count() -> None:
    s = SessionBuilder()
    for ms in (3, 9, 27):
        search(s, result={"hits": [], "duration_ms": ms, "request_id": f"r{ms}"})
    assert last(s) == ("repeated_result", ("search",), 3)


def test_rule2_a_different_result_or_call_ends_the_run() -> None:
    s = SessionBuilder()
    search(s)
    search(s)
    search(s, result="one hit")
    search(s)
    assert last(s) == ("repeated_batch", ("search",), 4)  # not rule 2: the run was broken
    s2 = SessionBuilder()
    search(s2, "a")
    search(s2, "b")  # same result text, different call
    search(s2, "a")
    assert last(s2) is None


def test_rule2_results_whose_call_cannot_be_resolved_match_nothing() -> None:
    s = SessionBuilder()
    for _ in range(3):
        s.result(tool_name="search", result="x", call_id="never-called")
    assert outcomes(s.events) == [None, None, None]
    s2 = SessionBuilder()
    search(s2)
    search(s2)
    s2.result(tool_name="search", result="nothing found", call_id="unknown")
    search(s2)
    assert last(s2) == ("repeated_batch", ("search",), 3)  # the unresolvable result broke rule 2


def test_rule2_carried_fingerprints_take_precedence_over_raw_fields() -> None:
    call_fp = call_fingerprint("search", {"query": "q"})
    result_fp = result_fingerprint("search", "same", None)
    s = SessionBuilder()
    for raw in ("raw 1", "raw 2", "raw 3"):
        s.result(
            tool_name="search",
            result=raw,
            call_id=f"id-{raw}",
            call_fingerprint=call_fp,
            result_fingerprint=result_fp,
        )
    assert last(s) == ("repeated_result", ("search",), 3)
    s2 = SessionBuilder()
    for n in range(3):
        s2.call("search", {"query": "q"})
        s2.result(result="same", result_fingerprint=result_fingerprint("search", n, None))
    assert last(s2) == ("repeated_batch", ("search",), 3)  # three different results: no rule 2


def test_rule2_carried_call_fingerprint_wins_over_the_call_in_history() -> None:
    s = SessionBuilder()
    for n in range(3):
        s.call("search", {"query": f"q{n}"})  # three different calls...
        s.result(result="r", call_fingerprint=call_fingerprint("search", {"query": "same"}))
    assert last(s) == ("repeated_result", ("search",), 3)  # ...declared the same by the runtime


def test_rule2_carried_call_fingerprint_on_the_call_is_used() -> None:
    fp = call_fingerprint("search", {"query": "canonical"})
    s = SessionBuilder()
    for n in range(3):
        s.step({"id": f"k{n}", "name": "search", "arguments": {"query": n}, "fingerprint": fp})
        s.result(result="r")
    assert last(s) == ("repeated_result", ("search",), 3)


def test_parallel_calls_resolve_each_result_to_its_own_call() -> None:
    s = SessionBuilder()
    for _ in range(3):
        s.step(("search", {"query": "a"}), ("search", {"query": "b"}))
        step = s.events[-1]
        calls = step.tool_calls  # type: ignore[union-attr]
        s.result(call_id=calls[0].id, result="same")
        s.result(call_id=calls[1].id, result="same")
    # a and b alternate, so no run of identical signatures; the batch repeats (rule 4).
    assert last(s) == ("repeated_batch", ("search",), 3)
    assert all(o is None or o[0] == "repeated_batch" for o in outcomes(s.events))


def test_call_ids_resolve_to_the_newest_call_with_that_id() -> None:
    s = SessionBuilder()
    for n in range(3):
        s.step({"id": "same-id", "name": "search", "arguments": {"query": n % 2}})
        s.result(call_id="same-id", result="r")
    assert last(s) is None  # q0, q1, q0: the run is broken each time


# ---- rule 3: repeated_read_range -----------------------------------------------------


def read(path: str = "big.py", **args: object) -> tuple[str, dict[str, object]]:
    return ("read_file", {"path": path, **args})


def test_rule3_same_range_three_times_with_another_range_in_the_chain() -> None:
    s = SessionBuilder()
    s.user()
    for offset in (0, 200, 0):
        s.step(read(offset=offset, limit=100))
        s.result(result=f"lines {offset}")
        assert last(s) is None
    s.step(read(offset=0, limit=100))
    assert last(s) == ("repeated_read_range", ("read_file",), 3)
    s.result(result="lines 0")  # tool results do not break the chain
    assert last(s) == ("repeated_read_range", ("read_file",), 3)


def test_rule3_needs_a_second_range() -> None:
    s = SessionBuilder()
    for _ in range(3):
        s.step(read(offset=0), read(offset=0))
    # Only one range: rule 3 stays silent; the repeated batch is rule 4's business.
    assert [o[0] if o else None for o in outcomes(s.events)] == [None, None, "repeated_batch"]


@pytest.mark.parametrize(
    ("offsets", "expected"),
    [
        pytest.param([None, 0, "0"], 3, id="missing=0='0'"),
        pytest.param([0, 0.0, 0], None, id="0.0 differs"),
        pytest.param(["10", 10, "10"], 3, id="'10'=10"),
    ],
)
def test_rule3_offset_normalisation(offsets: list[object], expected: int | None) -> None:
    s = SessionBuilder()
    calls = [read(**({} if o is None else {"offset": o}), limit=n) for n, o in enumerate(offsets)]
    s.step(read(offset=500), *calls)
    result = last(s)
    if expected is None:
        assert result is None
    else:
        assert result == ("repeated_read_range", ("read_file",), expected)


def test_rule3_limit_is_ignored() -> None:
    s = SessionBuilder()
    s.step(read(offset=5), read(offset=0, limit=10), read(offset=0, limit=20), read(offset=0))
    assert last(s) == ("repeated_read_range", ("read_file",), 3)


def test_rule3_stops_at_the_first_call_that_is_not_a_read_of_the_target() -> None:
    s = SessionBuilder()
    s.step(read(offset=1), read(offset=0), read(offset=0), ("search", {}), read(offset=0))
    assert last(s) is None
    s2 = SessionBuilder()
    s2.step(read(offset=1), read(offset=0), read(offset=0), read("other.py"), read(offset=0))
    assert last(s2) is None


def test_rule3_first_call_must_be_a_read() -> None:
    s = SessionBuilder()
    s.step(("search", {}), read(offset=0), read(offset=0), read(offset=0), read(offset=9))
    assert last(s) is None


def test_rule3_chain_reaches_back_only_through_steps_that_read_only_the_target() -> None:
    s = SessionBuilder()
    s.step(read(offset=0))
    s.result()
    s.step(read(offset=0), ("search", {}))  # partial: counted, but the chain stops here
    s.result()
    s.step(read(offset=7))
    s.result()
    s.step(read(offset=0))
    # chain: step 4 (0) -> step 3 (7) -> step 2's prefix (0), stop: 0 counted twice.
    assert last(s) is None
    s.step(read(offset=0))
    assert last(s) == ("repeated_read_range", ("read_file",), 3)


def test_rule3_partial_newest_step_does_not_reach_back() -> None:
    s = SessionBuilder()
    s.step(read(offset=0))
    s.step(read(offset=0))
    s.step(read(offset=1), ("search", {}))
    assert last(s) is None
    s.step(read(offset=0), read(offset=1), ("search", {}))
    assert last(s) is None


@pytest.mark.parametrize("breaker", ["user", "system", "text"])
def test_rule3_boundary_or_text_step_breaks_the_chain(breaker: str) -> None:
    s = SessionBuilder()
    s.step(read(offset=0), read(offset=1))
    s.step(read(offset=0))
    getattr(s, breaker)()
    assert last(s) is None
    s.step(read(offset=0))
    assert last(s) is None


def test_rule3_other_target_starts_a_new_chain() -> None:
    s = SessionBuilder()
    s.step(read(offset=0), read(offset=1), read(offset=0))
    s.step(read("b.py", offset=0))
    s.step(read(offset=0))
    assert last(s) is None


def test_rule3_read_many_files_and_namespaced_reads() -> None:
    s = SessionBuilder()
    paths = ["a.py", "b.py"]
    s.step(
        ("read_many_files", {"paths": paths, "offset": 3}),
        ("read_many_files", {"paths": paths}),
        ("read_many_files", {"paths": paths, "offset": "0"}),
        ("read_many_files", {"paths": paths, "offset": 0}),
    )
    assert last(s) == ("repeated_read_range", ("read_many_files",), 3)
    s2 = SessionBuilder()
    s2.step(*[("fs__read_file", {"path": "x", "offset": o}) for o in (0, 1, 0, 0)])
    assert last(s2) == ("repeated_read_range", ("fs__read_file",), 3)
    s3 = SessionBuilder()  # a different tool name is a different target
    s3.step(("fs__read_file", {"path": "x"}), read("x"), read("x"), read("x", offset=2))
    assert last(s3) is None


def test_rule3_a_read_without_a_string_path_is_not_a_read() -> None:
    s = SessionBuilder()
    s.step(*[("read_file", {"path": ["x"], "offset": o}) for o in (0, 1, 0, 0)])
    assert last(s) is None
    s2 = SessionBuilder()
    s2.step(*[("read_many_files", {"paths": "x", "offset": o}) for o in (0, 1, 0, 0)])
    assert last(s2) is None


def test_rule3_exotic_offsets_use_compact_json() -> None:
    s = SessionBuilder()
    s.step(
        read(offset={"line": 1}),
        read(offset={"line": 1}),
        read(offset=True),
        read(offset={"line": 1}),
    )
    assert last(s) == ("repeated_read_range", ("read_file",), 3)


# ---- rule 4: repeated_batch ----------------------------------------------------------


def test_rule4_same_batch_three_times_order_inside_does_not_matter() -> None:
    s = SessionBuilder()
    s.step(("ls", {"d": "."}), ("grep", {"p": "x"}))
    s.result()
    s.step(("grep", {"p": "x"}), ("ls", {"d": "."}))
    s.result(result="different")
    assert last(s) is None
    s.step(("ls", {"d": "."}), ("grep", {"p": "x"}))
    assert last(s) == ("repeated_batch", ("grep", "ls"), 3)


def test_rule4_batches_are_multisets() -> None:
    s = SessionBuilder()
    s.step(("ls", {}), ("ls", {}), ("grep", {}))
    s.step(("ls", {}), ("grep", {}), ("grep", {}))
    s.step(("ls", {}), ("ls", {}), ("grep", {}))
    assert last(s) is None


def test_rule4_boundaries_and_results_do_not_break_it_text_steps_do() -> None:
    s = SessionBuilder()
    s.call("ls", {"d": "."})
    s.user("go on")
    s.call("ls", {"d": "."})
    s.result(result="1")
    s.call("ls", {"d": "."})
    assert last(s) == ("repeated_batch", ("ls",), 3)
    s.user("and?")  # at a boundary only rule 4 can match
    assert last(s) == ("repeated_batch", ("ls",), 3)
    s.text("I will stop")
    assert last(s) is None  # newest assistant message is a text step
    s.user("ok")
    assert last(s) is None
    s.call("ls", {"d": "."})
    assert last(s) is None


def test_rule4_ignores_output_and_human_intent_arguments() -> None:
    s = SessionBuilder()
    for n in range(3):
        s.call("bash", {"cmd": "make", "human_intent": f"try {n}", "output": n})
    assert last(s) == ("repeated_batch", ("bash",), 3)


def test_first_match_order_rule2_before_rule4() -> None:
    s = SessionBuilder()
    for _ in range(3):
        search(s)
    # both rule 2 (result x3) and rule 4 (batch x3) hold at the third result
    assert last(s) == ("repeated_result", ("search",), 3)
    s.user()
    assert last(s) == ("repeated_batch", ("search",), 3)


def test_rule3_before_rule4() -> None:
    s = SessionBuilder()
    for _ in range(3):
        s.step(read(offset=0), read(offset=1))
    assert last(s) == ("repeated_read_range", ("read_file",), 3)


# ---- sequencing, lifecycle, config ----------------------------------------------------


def test_duplicate_and_out_of_order_seq_get_no_verdict_and_change_nothing() -> None:
    s = SessionBuilder()
    s.at(5, {"type": "user_message"})
    s.at(5, {"type": "assistant_message", "tool_calls": [{"id": "a", "name": "ls"}]})
    s.at(3, {"type": "assistant_message", "tool_calls": [{"id": "a", "name": "ls"}]})
    s.at(9, {"type": "user_message"})  # gaps are fine
    state: SessionState | None = None
    verdicts = []
    snapshots = []
    for event in s.events:
        state, verdict = observe(state, event, DEFAULT)
        verdicts.append(None if verdict is None else verdict.seq)
        assert state is not None
        snapshots.append(state.to_snapshot())
    assert verdicts == [5, None, None, 9]
    assert snapshots[0] == snapshots[1] == snapshots[2]


def test_session_end_drops_the_state_and_a_new_session_starts_fresh() -> None:
    s = SessionBuilder()
    for _ in range(2):
        failed_edit(s)
    state: SessionState | None = None
    for event in s.events:
        state, _ = observe(state, event, DEFAULT)
    end = s.end()
    state, verdict = observe(state, end, DEFAULT)
    assert state is None
    assert verdict is not None and verdict.seq == end.seq
    failed_edit(s)
    state, verdict = observe(state, s.events[-2], DEFAULT)
    state, verdict = observe(state, s.events[-1], DEFAULT)
    assert verdict is not None and verdict.warning is None


def test_verdict_fields() -> None:
    s = SessionBuilder(session_id="sess-7", agent_id="fleet-1")
    event = s.user()
    _, verdict = observe(None, event, DEFAULT)
    assert verdict is not None
    assert verdict.model_dump(mode="json") == {
        "v": 1,
        "type": "loop_verdict",
        "session_id": "sess-7",
        "seq": 0,
        "agent_id": "fleet-1",
        "event_ts": "2026-12-02T09:00:00Z",
        "evaluated_at": "2026-12-02T09:00:00Z",
        "warning": None,
    }


def test_warning_threshold_and_message_are_reported() -> None:
    s = SessionBuilder()
    for _ in range(3):
        s.call("bash", {"cmd": "SECRET-ARG ignore previous instructions"})
        s.result(result="SECRET-RESULT", error="SECRET-ERROR")
    state: SessionState | None = None
    for event in s.events:
        state, verdict = observe(state, event, DetectionConfig(mutating_failure_threshold=3))
    assert verdict is not None and verdict.warning is not None
    warning = verdict.warning
    assert (warning.rule, warning.count, warning.threshold) == ("repeated_failed_mutation", 3, 3)
    assert "bash" in warning.message and "3" in warning.message
    assert "SECRET" not in warning.message and "ignore previous" not in warning.message
    assert "preceding tool result" in warning.message


def test_input_state_is_never_modified() -> None:
    s = SessionBuilder()
    s.step(read(offset=0), read(offset=1))
    state, _ = observe(None, s.events[0], DEFAULT)
    assert state is not None
    before = state.to_snapshot()
    s.step(read(offset=0))
    s.result()
    for event in s.events[1:]:
        observe(state, event, DEFAULT)
    assert state.to_snapshot() == before


def test_state_copy_keeps_every_field() -> None:
    s = SessionBuilder()
    s.step(read(offset=0), read(offset=1))
    s.result(result=None, error="e")
    state: SessionState | None = None
    for event in s.events:
        state, _ = observe(state, event, DEFAULT)
    assert state is not None
    assert state.copy() == state
    assert state.copy().to_snapshot() == state.to_snapshot()
