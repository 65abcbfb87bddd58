"""Property tests of the incremental core against the history re-scan in tests/support/reference.py.

(a) core == reference for every event of generated sessions; (b) bounded state over long
sessions; (c) sessions never influence each other; (d) determinism; (e) snapshot round
trips mid-session. Sessions are built from a small alphabet of tools and values so that
loops, near-loops and every edge of docs/contract.md §4 come up often.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.models import (
    EVENT_ADAPTER,
    AgentEvent,
    DetectionConfig,
    LoopVerdict,
    LoopWarning,
    call_fingerprint,
    result_fingerprint,
)
from loopwatch.streams.detector import MAX_REMEMBERED_CALLS, SessionState, observe
from tests.support import reference
from tests.support.shared_data import trajectory_files

# Markers inside raw content: none of them may reach a snapshot or a warning message.
RAW = "zqx"

# The alphabet of calls: (tool name, arguments).
CALLS: tuple[tuple[str, Any], ...] = (
    ("read_file", {"path": "a.py"}),  # 0: offset missing → "0"
    ("read_file", {"path": "a.py", "offset": 0}),  # 1: same range as 0
    ("read_file", {"path": "a.py", "offset": "0"}),  # 2: same range as 0
    ("read_file", {"path": "a.py", "offset": 0.0}),  # 3: a different range
    ("read_file", {"path": "a.py", "offset": 40}),
    ("read_file", {"path": "a.py", "offset": 40, "limit": 20}),  # limit ignored
    ("read_file", {"path": "a.py", "offset": "40", "limit": 10}),
    ("read_file", {"path": "b.py", "offset": 0}),
    ("read_file", {"path": "a.py ", "offset": 40}),  # path taken as sent: not a.py
    ("read_file", {"path": "a.py", "offset": 80, "human_intent": "look"}),
    ("fs__read_file", {"path": "a.py", "offset": 40}),
    ("read_many_files", {"paths": ["a.py", "b.py"]}),
    ("read_many_files", {"paths": ["a.py", "b.py"], "offset": 10}),
    ("read_many_files", {"paths": ["b.py", "a.py"]}),
    ("x__read_many_files", {"paths": ["a.py"], "offset": 5}),
    ("read_file", {"offset": 0}),  # no path: not a read
    ("read_file", {"path": 7}),  # path not a string: not a read
    ("read_many_files", {"paths": "a.py"}),  # paths not a list: not a read
    ("read_file", {"path": "a.py", "offset": None}),  # range "null"
    ("read_file", {"path": "a.py", "offset": [1]}),  # range "[1]"
    ("edit_file", {"path": "a.py", "old": "zqx-1", "new": "zqx-2"}),
    ("edit_file", {"path": "a.py", "old": "zqx-1", "new": "zqx-3"}),
    ("bash", {"cmd": "zqx pytest"}),
    ("bash", {"cmd": "zqx pytest", "output": "zqx 1 failed"}),  # same fingerprint as above
    ("fs__write_file", {"path": "c.py", "content": "zqx"}),
    ("delete_file", {"path": "c.py"}),
    ("search", {"q": "zqx foo"}),
    ("get_user", {}),
    ("xedit_file", {"path": "a.py"}),  # not mutating: no "__" before the base name
    # Rarer shapes, each next to the one it must (not) equal:
    ("read_file", {"path": "a.py", "offset": True}),  # range "true" ...
    ("read_file", {"path": "a.py", "offset": "true"}),  # ... as is the string "true"
    ("read_file", {"path": "a.py", "offset": {"b": 1, "a": 2}}),  # compact JSON, sorted
    ("read_file", {"path": "a.py", "offset": '{"a":2,"b":1}'}),  # the same range
    ("read_many_files", {"paths": [{"b": 1, "a": 2}]}),
    ("read_many_files", {"paths": [{"a": 2, "b": 1}]}),  # the same resource
    ("mcp__fs__read_file", {"path": "a.py", "offset": 1}),
    ("__read_file", {"path": "a.py"}),
    ("read_file", {"path": "a.py", "offset": "0 "}),  # a string is taken as is: not "0"
    ("mcp__x__bash", {"c": 1}),  # mutating
    ("READ_FILE", {"path": "a.py", "offset": 2}),  # names are case-sensitive: not a read
)
ERRORS: tuple[str | None, ...] = (
    None,
    "zqx: permission denied",
    "zqx: permission denied  \r\n",  # normalises to the one above
    "zqx: no match",
    "",  # failed: an empty error is still a string
    "  \r\n",  # normalises to ""
)
RESULTS: tuple[Any, ...] = (
    None,
    "zqx ok",
    "zqx ok \n",  # normalises to the one above
    {"value": 1, "elapsed_ms": 3},
    {"value": 1, "elapsed_ms": 8},  # same fingerprint as the one above
    {"value": 2},
    ["zqx", 1],
)
FAKE_FPS = ("sha256:" + "a" * 64, "sha256:" + "b" * 64)
RESULT_NAMES = ("edit_file", "bash", "search")
BASE_TS = datetime(2026, 1, 1, tzinfo=UTC)

# --- generated sessions --------------------------------------------------------------

# seq modes: mostly in order; "dup" repeats the last seq, "old" goes back (both skipped).
SEQ_MODES = ("next",) * 8 + ("gap", "dup", "old")

call_spec = st.tuples(
    # every call, with extra weight on the reads of a.py and on two mutating calls
    st.one_of(
        st.integers(0, len(CALLS) - 1), st.sampled_from((0, 1, 2, 3, 4, 5, 6, 8, 20, 22, 24))
    ),
    st.sampled_from((0, 0, 0, 0, 1, 2)),  # id: fresh / a shared constant / the last id
    st.sampled_from((0, 0, 0, 0, 0, 1, 2, 3)),  # carried fingerprint: none/true/fake a/b
)
step_action = st.tuples(st.just("step"), st.lists(call_spec, min_size=1, max_size=3))
result_action = st.tuples(
    st.just("result"),
    st.tuples(
        st.integers(-1, 3),  # which recent call (counting back); -1: an unknown id
        st.integers(0, len(ERRORS) - 1),
        st.integers(0, len(RESULTS) - 1),
        st.sampled_from((0, 0, 0, 0, 1, 2)),  # carried call fp: none / true / fake
        st.sampled_from((0, 0, 0, 0, 1, 2)),  # carried result fp: none / true / fake
        st.sampled_from((0, 0, 0, 0, 0, 1, 2, 3)),  # tool_name: the call's / another
    ),
)
plain_action = st.tuples(
    st.sampled_from(("user", "text", "system", "user", "text", "end")), st.none()
)
# one_of is uniform over its branches: repeat branches to weight them.
action = st.one_of(
    step_action,
    step_action,
    step_action,
    result_action,
    result_action,
    result_action,
    result_action,
    plain_action,
)
timed_action = st.tuples(action, st.sampled_from(SEQ_MODES))
# Hypothesis keeps lists short on average (~5); the second branch gives ~20 events, the
# first lets a failure shrink to very few.
actions = st.one_of(
    st.lists(timed_action, min_size=1, max_size=40),
    st.lists(timed_action, min_size=10, max_size=40),
)
configs = st.builds(
    lambda t, m: DetectionConfig(threshold=t, mutating_failure_threshold=m),
    st.integers(1, 4),
    st.integers(1, 4),
)


class SessionBuilder:
    """Turns abstract actions into event dicts of one session (in publishing order)."""

    def __init__(self, session_id: str, agent_id: str | None = "agent-1") -> None:
        self.session_id = session_id
        self.agent_id = agent_id
        self.seq = -1
        self.emitted = 0
        self.fresh_ids = 0
        self.calls: list[tuple[str, str, Any, str | None]] = []  # id, name, args, fp

    def _common(self, kind: str, seq_mode: str) -> dict[str, Any]:
        if self.seq < 0 or seq_mode == "next":
            self.seq += 1
            seq = self.seq
        elif seq_mode == "gap":
            self.seq += 3
            seq = self.seq
        elif seq_mode == "dup":
            seq = self.seq
        else:  # "old"
            seq = max(0, self.seq - 2)
        self.emitted += 1
        ts = BASE_TS + timedelta(seconds=self.emitted)
        return {
            "v": 1,
            "type": kind,
            "session_id": self.session_id,
            "seq": seq,
            "ts": ts.isoformat().replace("+00:00", "Z"),
            "agent_id": self.agent_id,
        }

    def _call_id(self, mode: int) -> str:
        if mode == 1:
            return "shared-id"
        if mode == 2 and self.calls:
            return self.calls[-1][0]
        self.fresh_ids += 1
        return f"c{self.fresh_ids}"

    def event(self, act: tuple[str, Any], seq_mode: str) -> dict[str, Any]:
        kind, arg = act
        if kind in ("user", "system"):
            return {**self._common(f"{kind}_message", seq_mode), "text": "zqx hello"}
        if kind == "text":
            return {**self._common("assistant_message", seq_mode), "text": "zqx thinking"}
        if kind == "end":
            return self._common("session_end", seq_mode)
        if kind == "step":
            calls = []
            for index, id_mode, fp_mode in arg:
                name, args = CALLS[index]
                fp = (None, call_fingerprint(name, args), *FAKE_FPS)[fp_mode]
                call_id = self._call_id(id_mode)
                self.calls.append((call_id, name, args, fp))
                call: dict[str, Any] = {"id": call_id, "name": name, "arguments": args}
                if fp is not None:
                    call["fingerprint"] = fp
                calls.append(call)
            return {**self._common("assistant_message", seq_mode), "tool_calls": calls}
        assert kind == "result"
        pick, error_index, result_index, cfp_mode, rfp_mode, name_mode = arg
        if pick < 0 or not self.calls:
            call_id, name, true_fp = f"ghost-{self.emitted}", "edit_file", FAKE_FPS[0]
        else:
            call_id, name, args, carried = self.calls[-1 - pick % len(self.calls)]
            true_fp = carried if carried is not None else call_fingerprint(name, args)
        tool_name = (name, *RESULT_NAMES)[name_mode]
        error, result = ERRORS[error_index], RESULTS[result_index]
        event = {
            **self._common("tool_result", seq_mode),
            "call_id": call_id,
            "tool_name": tool_name,
            "result": result,
            "error": error,
        }
        if cfp_mode:
            event["call_fingerprint"] = (true_fp, FAKE_FPS[1])[cfp_mode - 1]
        if rfp_mode:
            rfp = result_fingerprint(tool_name, result, error)
            event["result_fingerprint"] = (rfp, FAKE_FPS[1])[rfp_mode - 1]
        return event


def build_session(acts: Sequence[tuple[tuple[str, Any], str]], session_id: str = "s") -> list:
    builder = SessionBuilder(session_id)
    return [builder.event(act, seq_mode) for act, seq_mode in acts]


def decode(raw: dict[str, Any]) -> AgentEvent:
    return EVENT_ADAPTER.validate_python(raw)


# --- helpers ---------------------------------------------------------------------------


def project(warning: LoopWarning | None) -> Any:
    if warning is None:
        return None
    return reference.ExpectedWarning(
        warning.rule, tuple(warning.tool_names), warning.count, warning.threshold
    )


def snapshot_json(state: SessionState | None) -> str | None:
    return None if state is None else json.dumps(state.to_snapshot(), sort_keys=True)


def run_core(
    events: Sequence[AgentEvent],
    config: DetectionConfig,
    between: Callable[[SessionState], SessionState] | None = None,
) -> list[bytes | None]:
    """Verdict JSON per event (None when skipped), one session map for all events."""
    states: dict[str, SessionState] = {}
    out: list[bytes | None] = []
    for event in events:
        state, verdict = observe(states.get(event.session_id), event, config)
        if state is None:
            states.pop(event.session_id, None)
        else:
            states[event.session_id] = between(state) if between else state
        out.append(None if verdict is None else verdict.to_json())
    return out


def counterexample(raws: Sequence[dict[str, Any]], config: DetectionConfig) -> str:
    lines = "\n".join(json.dumps(raw) for raw in raws)
    return f"config={config!r}\nevents up to the mismatch:\n{lines}"


def check_against_reference(raws: Sequence[dict[str, Any]], config: DetectionConfig) -> None:
    replay = reference.ReplaySession(config)
    state: SessionState | None = None
    for index, raw in enumerate(raws):
        event = decode(raw)
        skipped = replay.last_seq is not None and event.seq <= replay.last_seq
        before = snapshot_json(state)
        processed, expected = replay.feed(event)
        assert processed is not skipped
        new_state, verdict = observe(state, event, config)
        context = counterexample(raws[: index + 1], config)
        if skipped:
            assert verdict is None, context
            assert snapshot_json(new_state) == before, context
            continue
        assert isinstance(verdict, LoopVerdict), context
        assert (verdict.session_id, verdict.seq, verdict.agent_id, verdict.event_ts) == (
            event.session_id,
            event.seq,
            event.agent_id,
            event.ts,
        )
        assert project(verdict.warning) == expected, context
        if verdict.warning is not None:
            assert verdict.warning.message, context
            assert RAW not in verdict.warning.message, context
        if event.type == "session_end":
            assert new_state is None, context
        else:
            assert new_state is not None, context
        state = new_state


# --- (a) core == reference ---------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=actions, config=configs)
def test_core_matches_history_rescan(acts: list, config: DetectionConfig) -> None:
    check_against_reference(build_session(acts), config)


# Loop-dense variant: few distinct calls, so runs and chains get long.
dense_action = st.one_of(
    st.tuples(
        st.just("step"),
        st.lists(
            st.tuples(st.sampled_from((0, 1, 2, 3, 4, 8, 11, 20, 22, 24)), st.just(0), st.just(0)),
            min_size=1,
            max_size=2,
        ),
    ),
    st.tuples(
        st.just("result"),
        st.tuples(
            st.just(0),  # the newest call
            st.sampled_from((0, 1)),  # ok / failed
            st.sampled_from((0, 1)),
            st.just(0),
            st.just(0),
            st.just(0),
        ),
    ),
    st.tuples(st.sampled_from(("user", "text")), st.none()),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=st.lists(st.tuples(dense_action, st.just("next")), max_size=60), config=configs)
def test_core_matches_history_rescan_loop_dense(acts: list, config: DetectionConfig) -> None:
    check_against_reference(build_session(acts), config)


# Known answers: they pin the reference to docs/contract.md §4 and are checked against the core too.
def _step(*calls: int) -> tuple[tuple[str, Any], str]:
    return (("step", [(c, 0, 0) for c in calls]), "next")


def _result(error: int = 0, result: int = 1) -> tuple[tuple[str, Any], str]:
    return (("result", (0, error, result, 0, 0, 0)), "next")


def _plain(kind: str) -> tuple[tuple[str, Any], str]:
    return ((kind, None), "next")


def _expectations(acts: list, config: DetectionConfig) -> list[Any]:
    replay = reference.ReplaySession(config)
    return [replay.feed(decode(raw))[1] for raw in build_session(acts)]


def test_reference_known_answers() -> None:
    warn = reference.ExpectedWarning
    config = DetectionConfig()
    # Two identical failed edits: rule 1 at the second result, and still at the text
    # step after it (the newest result since the boundary is unchanged); not after a user.
    acts = [_step(20), _result(1), _step(20), _result(2), _plain("text"), _plain("user")]
    expected = _expectations(acts, config)
    rule1 = warn("repeated_failed_mutation", ("edit_file",), 2, 2)
    assert expected == [None, None, None, rule1, rule1, None]
    check_against_reference(build_session(acts), config)

    # Missing offset, 0 and "0" are one range; a second range (40) is needed.
    acts = [_step(0), _step(1), _step(2)]  # one range only: left to rules 2 and 4
    assert _expectations(acts, config)[-1] is None
    acts = [_step(0, 4), _step(1), _step(2)]
    assert _expectations(acts, config)[-1] == warn("repeated_read_range", ("read_file",), 3, 3)
    acts = [_step(3, 4), _step(1), _step(2)]  # 0.0 is not 0
    assert _expectations(acts, config)[-1] is None
    acts = [_step(0, 4), _step(1), _plain("text"), _step(2)]  # a text step breaks the chain
    assert _expectations(acts, config)[-1] is None
    # A batch is a multiset: order inside the step does not matter, a user message
    # does not break the run, a text step does.
    acts = [_step(22, 26), _plain("user"), _step(26, 22), _step(22, 26)]
    assert _expectations(acts, config)[-1] == warn("repeated_batch", ("bash", "search"), 3, 3)
    acts = [_step(22, 26), _plain("text"), _step(26, 22), _step(22, 26)]
    assert _expectations(acts, config)[-1] is None
    for acts in ([_step(0, 4), _step(1), _step(2)], [_step(22, 26), _step(26, 22), _step(22)]):
        check_against_reference(build_session(acts), config)


def test_reference_known_answers_signatures() -> None:
    warn = reference.ExpectedWarning
    config = DetectionConfig()
    rule1 = warn("repeated_failed_mutation", ("edit_file",), 2, 2)
    fail_same = (("result", (0, 1, 1, 0, 0, 0)), "next")  # the newest call, failed
    ghost = (("result", (-1, 1, 1, 0, 0, 0)), "next")  # an id no call had
    # A reused call id resolves to the most recent call with that id: two different
    # edits, so no run of 2.
    reused = [(("step", [(20, 1, 0)]), "next"), fail_same, (("step", [(21, 1, 0)]), "next")]
    assert _expectations([*reused, fail_same], config)[-1] is None
    # The same edit under the reused id: a run of 2.
    reused_same = [(("step", [(20, 1, 0)]), "next"), fail_same, (("step", [(20, 1, 0)]), "next")]
    assert _expectations([*reused_same, fail_same], config)[-1] == rule1
    # An unresolvable result ends the run, and when newest, rules 1 and 2 cannot match.
    acts = [_step(20), fail_same, ghost, _step(20), fail_same]
    assert _expectations(acts, config)[-1] is None
    assert _expectations([_step(20), fail_same, _step(20), fail_same, ghost], config)[-1] is None
    # A carried call fingerprint resolves a result whose id no call had.
    carried = (("result", (-1, 1, 1, 1, 0, 0)), "next")
    assert _expectations([carried, carried], config)[-1] == rule1
    # A carried result fingerprint is used as it is: two different raw results match.
    with_fp = (("result", (0, 1, 1, 0, 2, 0)), "next")
    other_raw = (("result", (0, 3, 5, 0, 2, 0)), "next")
    assert _expectations([_step(20), with_fp, _step(20), other_raw], config)[-1] == rule1
    # session_end is evaluated, then the session starts afresh.
    acts = [_step(20), fail_same, _step(20), fail_same, _plain("end"), _step(20), fail_same]
    assert _expectations(acts, config)[-4:] == [rule1, rule1, None, None]
    for acts in (
        [*reused, fail_same],
        [*reused_same, fail_same],
        [_step(20), fail_same, ghost, _step(20), fail_same],
        [carried, carried],
        [_step(20), with_fp, _step(20), other_raw],
        [_step(20), fail_same, _step(20), fail_same, _plain("end"), _step(20), fail_same],
    ):
        check_against_reference(build_session(acts), config)


@pytest.mark.shared
@pytest.mark.parametrize("name", ["swe-agent.events.jsonl", "tau-airline.events.jsonl"])
def test_core_matches_history_rescan_on_real_trajectories(name: str) -> None:
    # skips without ../shared, fails under CI=true (`trajectory_files`)
    path = next((file for file in trajectory_files() if file.name == name), None)
    assert path is not None, f"{name} is not among the shared trajectories"
    config = DetectionConfig()
    replays: dict[str, Any] = {}
    states: dict[str, SessionState] = {}
    warnings = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        event = EVENT_ADAPTER.validate_json(line)
        replay = replays.setdefault(event.session_id, reference.ReplaySession(config))
        processed, expected = replay.feed(event)
        state, verdict = observe(states.get(event.session_id), event, config)
        if state is None:
            states.pop(event.session_id, None)
        else:
            states[event.session_id] = state
        assert (verdict is not None) is processed, line
        assert verdict is None or project(verdict.warning) == expected, line
        warnings += expected is not None
    assert warnings >= (1 if name.startswith("swe") else 0)


# --- (b) bounded state over long sessions -----------------------------------------------

LONG_EVENTS = 6_000
ID_LEN = 32
# The remembered call ids (id digest + call digest + JSON punctuation ≈ 80 B each) plus
# small counters, at most 256 ranges and the newest batch: a generous fixed ceiling.
SNAPSHOT_CEILING = MAX_REMEMBERED_CALLS * (ID_LEN + 100) + 48 * 1024


def long_session(seed: int, session_id: str = "long") -> Iterator[dict[str, Any]]:
    """A long, varied session: unique long call ids, many files, long failure runs,
    long read chains (< 256 distinct ranges), repeated batches, boundaries."""
    rng = random.Random(seed)
    builder = SessionBuilder(session_id)
    ids = iter(range(10**9))

    def call_id() -> str:
        return f"toolu_{seed % 1000:03d}_{next(ids):0{ID_LEN - 10}d}"

    def step(calls: list[tuple[str, Any]]) -> Iterator[dict[str, Any]]:
        made = [(call_id(), name, args) for name, args in calls]
        yield {
            **builder._common("assistant_message", "next"),
            "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in made],
        }
        for i, n, _ in made:
            failed = n in ("edit_file", "bash") and rng.random() < 0.7
            yield {
                **builder._common("tool_result", "next"),
                "call_id": i,
                "tool_name": n,
                "result": None if failed else f"{RAW} content {rng.randrange(3)}",
                "error": f"{RAW} failure {rng.randrange(2)}" if failed else None,
            }

    emitted = 0
    while True:
        pattern = rng.randrange(7)
        path = f"src/{RAW}_{rng.randrange(500)}.py"
        if pattern == 0:  # a read chain with many distinct offsets
            chunk = [
                ("read_file", {"path": path, "offset": rng.randrange(250), "limit": 50})
                for _ in range(rng.randrange(1, 120))
            ]
            batch: Iterator[dict[str, Any]] = step(chunk)
        elif pattern == 1:  # a failing edit, again and again
            edit = ("edit_file", {"path": path, "old": f"{RAW} a", "new": f"{RAW} b"})
            batch = (e for _ in range(rng.randrange(1, 30)) for e in step([edit]))
        elif pattern == 2:  # the same parallel batch
            pair = [("bash", {"cmd": f"{RAW} make {rng.randrange(5)}"}), ("search", {"q": path})]
            batch = (e for _ in range(rng.randrange(1, 30)) for e in step(pair))
        elif pattern == 3:
            batch = iter(
                [
                    {
                        **builder._common(rng.choice(("user", "system")) + "_message", "next"),
                        "text": f"{RAW} hi",
                    }
                ]
            )
        elif pattern == 4:
            batch = iter([{**builder._common("assistant_message", "next"), "text": RAW}])
        elif pattern == 5:  # a result nobody can resolve
            batch = iter(
                [
                    {
                        **builder._common("tool_result", "next"),
                        "call_id": call_id(),
                        "tool_name": "bash",
                        "result": RAW,
                        "error": None,
                    }
                ]
            )
        else:
            batch = step([("read_many_files", {"paths": [path, f"{RAW}.md"]})])
        for raw in batch:
            yield raw
            emitted += 1
            if emitted >= LONG_EVENTS:
                return


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_state_stays_bounded_and_holds_no_raw_content(seed: int) -> None:
    config = DetectionConfig()
    raws = list(long_session(seed))
    assert len(raws) == LONG_EVENTS
    state: SessionState | None = None
    largest = 0
    history: list[AgentEvent] = []
    for index, raw in enumerate(raws):
        event = decode(raw)
        history.append(event)
        state, verdict = observe(state, event, config)
        assert state is not None and verdict is not None
        if index % 50 == 0 or index == len(raws) - 1:
            text = json.dumps(state.to_snapshot())
            largest = max(largest, len(text))
            assert RAW not in text, "raw content in the snapshot"
            assert len(text) <= SNAPSHOT_CEILING, (index, len(text))
        if index % 1_000 == 999:  # the caps must not change any verdict in this range
            expected = reference.expected_warning(history, config)
            assert project(verdict.warning) == expected, (seed, index)
    assert "version" in state.to_snapshot()
    assert largest > 0


def _result_after_calls(calls_between: int) -> tuple[object, object]:
    """Expected (reference) and actual (core) warning for two failed results of a call
    that `calls_between` other calls followed."""
    builder = SessionBuilder("ids")
    raws = [
        {
            **builder._common("assistant_message", "next"),
            "tool_calls": [{"id": "first", "name": "edit_file", "arguments": {"path": "x"}}],
        }
    ]
    for n in range(calls_between):
        raws.append(
            {
                **builder._common("assistant_message", "next"),
                "tool_calls": [{"id": f"b{n}", "name": "bash", "arguments": {"cmd": str(n)}}],
            }
        )
    for _ in range(2):
        raws.append(
            {
                **builder._common("tool_result", "next"),
                "call_id": "first",
                "tool_name": "edit_file",
                "error": "zqx: denied",
            }
        )
    config = DetectionConfig()
    history = [decode(raw) for raw in raws]
    state: SessionState | None = None
    for event in history:
        state, verdict = observe(state, event, config)
    assert verdict is not None
    return reference.expected_warning(history, config), project(verdict.warning)


def test_call_ids_resolve_up_to_the_documented_cap() -> None:
    # The core remembers the most recent MAX_REMEMBERED_CALLS call ids (the spec says
    # "recent"; the reference has no cap). Just inside the cap both agree...
    expected, actual = _result_after_calls(MAX_REMEMBERED_CALLS - 1)
    assert expected == reference.ExpectedWarning("repeated_failed_mutation", ("edit_file",), 2, 2)
    assert actual == expected
    # ...one call further, the call is forgotten: the results have no signature.
    _, forgotten = _result_after_calls(MAX_REMEMBERED_CALLS)
    assert forgotten is None


# --- (c) sessions never influence each other ----------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sessions=st.lists(actions, min_size=2, max_size=3),
    order=st.lists(st.integers(0, 2), max_size=150),
    config=configs,
)
def test_sessions_do_not_interfere(
    sessions: list, order: list[int], config: DetectionConfig
) -> None:
    # The same call ids ("c1", "shared-id", ...) occur in every session on purpose.
    per_session = [
        [decode(raw) for raw in build_session(acts, f"s{n}")] for n, acts in enumerate(sessions)
    ]
    alone = [run_core(events, config) for events in per_session]
    cursors = [0] * len(per_session)
    interleaved: list[tuple[int, AgentEvent]] = []
    for pick in order:
        n = pick % len(per_session)
        if cursors[n] < len(per_session[n]):
            interleaved.append((n, per_session[n][cursors[n]]))
            cursors[n] += 1
    for n, events in enumerate(per_session):  # then drain what is left
        interleaved.extend((n, event) for event in events[cursors[n] :])
    together = run_core([event for _, event in interleaved], config)
    seen = [0] * len(per_session)
    for (n, _), verdict in zip(interleaved, together, strict=True):
        assert verdict == alone[n][seen[n]]
        seen[n] += 1
    assert seen == [len(events) for events in per_session]


# --- (d) determinism -----------------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=actions, config=configs)
def test_same_input_same_output(acts: list, config: DetectionConfig) -> None:
    events = [decode(raw) for raw in build_session(acts)]
    first, second = run_core(events, config), run_core(list(events), config)
    assert first == second
    assert len(first) == len(events)


# --- (e) snapshot round trip ---------------------------------------------------------------


def _round_trip(state: SessionState) -> SessionState:
    snapshot = state.to_snapshot()
    assert isinstance(snapshot.get("version"), int)
    return SessionState.from_snapshot(json.loads(json.dumps(snapshot)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=actions, config=configs, cut=st.integers(0, 40))
def test_snapshot_round_trip_keeps_verdicts(acts: list, config: DetectionConfig, cut: int) -> None:
    events = [decode(raw) for raw in build_session(acts)]
    straight = run_core(events, config)
    # Round trip after every event ...
    assert run_core(events, config, between=_round_trip) == straight
    # ... and once, at a drawn point, with the rest run on the restored state.
    state: SessionState | None = None
    out: list[bytes | None] = []
    for index, event in enumerate(events):
        if index == cut and state is not None:
            state = _round_trip(state)
        new_state, verdict = observe(state, event, config)
        state = new_state
        out.append(None if verdict is None else verdict.to_json())
    assert out == straight
