"""Property tests of the extended rules (docs/contract.md §9) against the history re-scan
in tests/support/reference_extended.py: core == reference for every event under generated
profiles and policies; snapshot round trips; bounded state; seed untouched.

Sessions are rounds of a tool step and its results, drawn from a few steps and outcomes,
so that cycles, identical calls in one turn and same-batch runs with changing outcomes
come up often, with the rough edges (missing, extra and unknown results, carried
fingerprints, boundaries and text steps mid-cycle) mixed in.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.models import (
    ALL_RULES,
    EVENT_ADAPTER,
    AgentEvent,
    DetectionConfig,
    LoopWarning,
    call_fingerprint,
    result_fingerprint,
    text_fingerprint,
)
from loopwatch.streams.detector import SessionState, observe
from tests.support import reference, reference_extended

RAW = "zqx"
CALLS: tuple[tuple[str, Any], ...] = (
    ("ls", {"dir": "."}),
    ("read_file", {"path": "file1.txt"}),
    ("read_file", {"path": "file2.txt"}),
    ("bash", {"cmd": f"{RAW} pytest"}),
    ("edit_file", {"path": "a.py", "old": RAW, "new": "y"}),
    ("get_job_status", {"id": 7}),
)
RESULTS: tuple[tuple[Any, str | None], ...] = (
    (f"{RAW} listing", None),
    (f"{RAW} content", None),
    (f"{RAW} other", None),
    (None, f"{RAW} failed"),
    # volatile variants (contract §9.9): equal to each other when loose, not by §3
    ({"out": f"{RAW} done in 0.5s", "elapsedMs": 12, "pid": 1}, None),
    ({"out": f"{RAW} done in 1.25s", "elapsedMs": 40, "pid": 2}, None),
    (None, f"{RAW} failed at 12:00:01, attempt 1"),
    (None, f"{RAW} failed at 12:00:09, attempt 2"),
)
TOOL_NAMES = tuple(sorted({name for name, _ in CALLS}))
BASE_TS = datetime(2026, 1, 1, tzinfo=UTC)

# One round: a tool step (1-4 calls; duplicates on purpose) and what answers it.
call_pick = st.sampled_from((0, 0, 1, 1, 2, 3, 4, 5))
result_plan = st.tuples(
    st.sampled_from((0, 0, 0, 0, 0, 0, 1, 2)),  # 0 answer / 1 skip / 2 answer twice
    st.sampled_from((0, 0, 0, 1, 2, 3, 4, 5, 6, 7)),  # which result
    st.sampled_from((0, 0, 0, 0, 0, 1)),  # 1: carried call and result fingerprints
)
round_action = st.tuples(
    st.just("round"),
    st.tuples(
        st.lists(call_pick, min_size=1, max_size=4),
        st.lists(result_plan, min_size=4, max_size=4),
        st.booleans(),  # results in reverse order
        st.sampled_from((0, 0, 0, 0, 1)),  # 1: a result nobody called, mid-round
        st.sampled_from((0, 0, 0, 0, 0, 1, 2)),  # same call id for all calls
    ),
)
plain_action = st.tuples(st.sampled_from(("user", "system", "text", "end")), st.none())
action = st.one_of(round_action, round_action, round_action, round_action, plain_action)
# A few fixed rounds repeated make long cycles likely.
actions = st.one_of(
    st.lists(action, min_size=1, max_size=30),
    st.lists(st.sampled_from(range(4)), min_size=6, max_size=30).flatmap(
        lambda picks: st.tuples(st.lists(action, min_size=4, max_size=4), st.just(picks)).map(
            lambda pair: [pair[0][i] for i in pair[1]]
        )
    ),
)
tool_subset = st.lists(st.sampled_from(TOOL_NAMES), max_size=2, unique=True)
configs = st.builds(
    lambda profile, t, m, c, k, e, f, aware, switches, exempt, own, volatile, ignore: (
        DetectionConfig(
            profile=profile,
            threshold=t,
            mutating_failure_threshold=m,
            call_in_turn_threshold=c,
            cycle_threshold=k,
            error_threshold=e,
            call_floor_threshold=f,
            result_aware_batches=aware,
            rules=switches,
            exempt_tools=exempt,
            tool_thresholds=own,
            volatile_results=volatile,
            result_ignore=ignore,
        )
    ),
    st.sampled_from(("seed", "extended", "extended")),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(2, 3),
    st.integers(1, 3),
    st.integers(2, 4),
    st.integers(2, 6),
    st.sampled_from((None, None, True, False)),
    st.dictionaries(st.sampled_from(ALL_RULES), st.booleans(), max_size=2),
    tool_subset,
    st.dictionaries(st.sampled_from(TOOL_NAMES), st.integers(1, 4), max_size=2),
    st.sampled_from((None, None, True, False)),
    st.sampled_from(({}, {}, {"bash": ("out",)}, {"ls": (r"re:[a-z]+ing",)})),
)


class Rounds:
    def __init__(self, session_id: str = "s") -> None:
        self.session_id = session_id
        self.seq = -1
        self.ids = 0

    def _common(self, kind: str) -> dict[str, Any]:
        self.seq += 1
        ts = BASE_TS + timedelta(seconds=self.seq)
        return {
            "type": kind,
            "session_id": self.session_id,
            "seq": self.seq,
            "ts": ts.isoformat(),
            "agent_id": "agent-1",
        }

    def events(self, act: tuple[str, Any]) -> list[dict[str, Any]]:
        kind, arg = act
        if kind in ("user", "system"):
            return [{**self._common(f"{kind}_message"), "text": RAW}]
        if kind == "text":
            return [{**self._common("assistant_message"), "text": RAW}]
        if kind == "end":
            return [self._common("session_end")]
        picks, plans, reverse, ghost, shared = arg
        calls = []
        for index in picks:
            self.ids += 1
            name, args = CALLS[index]
            call_id = "same" if shared == 1 else ("c1" if shared == 2 else f"c{self.ids}")
            calls.append({"id": call_id, "name": name, "arguments": args})
        out = [{**self._common("assistant_message"), "tool_calls": calls}]
        answers = []
        for call, (times, which, carried) in zip(calls, plans, strict=False):
            result, error = RESULTS[which]
            body = {
                "call_id": call["id"],
                "tool_name": call["name"],
                "result": result,
                "error": error,
            }
            if carried:
                body["call_fingerprint"] = call_fingerprint(call["name"], call["arguments"])
                body["result_fingerprint"] = result_fingerprint(call["name"], result, error)
            answers += [body] * (0 if times == 1 else 2 if times == 2 else 1)
        if reverse:
            answers.reverse()
        if ghost:
            answers.insert(len(answers) // 2, {"call_id": "ghost", "tool_name": "ls"})
        out += [{**self._common("tool_result"), **body} for body in answers]
        return out


def build(acts: Sequence[tuple[str, Any]], session_id: str = "s") -> list[AgentEvent]:
    rounds = Rounds(session_id)
    return [EVENT_ADAPTER.validate_python(raw) for act in acts for raw in rounds.events(act)]


def project(warning: LoopWarning | None) -> reference.ExpectedWarning | None:
    if warning is None:
        return None
    return reference.ExpectedWarning(
        warning.rule, tuple(warning.tool_names), warning.count, warning.threshold
    )


def verdicts(
    events: Sequence[AgentEvent], config: DetectionConfig, round_trip: bool = False
) -> list[bytes]:
    state: SessionState | None = None
    out = []
    for event in events:
        state, verdict = observe(state, event, config)
        assert verdict is not None
        out.append(verdict.to_json())
        if round_trip and state is not None:
            state = SessionState.from_snapshot(json.loads(json.dumps(state.to_snapshot())))
    return out


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=actions, config=configs)
def test_core_matches_the_extended_reference(acts: list, config: DetectionConfig) -> None:
    events = build(acts)
    replay = reference_extended.ReplaySession(config)
    state: SessionState | None = None
    for index, event in enumerate(events):
        _, expected = replay.feed(event)
        state, verdict = observe(state, event, config)
        assert verdict is not None
        context = "\n".join(e.model_dump_json() for e in events[: index + 1])
        assert project(verdict.warning) == expected, f"{config!r}\n{context}"
        if verdict.warning is not None:
            assert RAW not in verdict.warning.message


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=actions)
def test_the_seed_profile_is_the_seed_reference(acts: list) -> None:
    # Whatever the extended state holds, the seed profile judges as docs/contract.md §4 alone.
    events = build(acts)
    seed = reference.ReplaySession(DetectionConfig())
    state: SessionState | None = None
    for event in events:
        _, expected = seed.feed(event)
        state, verdict = observe(state, event, DetectionConfig())
        assert verdict is not None and project(verdict.warning) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=actions, config=configs)
def test_snapshot_round_trip_keeps_extended_verdicts(acts: list, config: DetectionConfig) -> None:
    events = build(acts)
    assert verdicts(events, config, round_trip=True) == verdicts(events, config)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    acts=actions,
    first=configs,
    second=configs,
    cuts=st.lists(st.integers(0, 60), max_size=3, unique=True),
)
def test_a_policy_change_mid_session_judges_like_a_rescan(
    acts: list, first: DetectionConfig, second: DetectionConfig, cuts: list[int]
) -> None:
    # Hot reload: after a switch each rule judges as a re-scan of the events its state
    # was kept for: the whole history for a rule both policies run, the events from the
    # switch on for one the new policy switches on (contract §9.1). Switching back and
    # forth drops a state and starts it again.
    events = build(acts)
    state: SessionState | None = None
    history: list[AgentEvent] = []
    kept = reference_extended.KeptSince()
    for index, event in enumerate(events):
        config = (first, second)[sum(cut <= index for cut in cuts) % 2]
        if history and history[-1].type == "session_end":
            history, kept = [], reference_extended.KeptSince()
        history.append(event)
        since = kept.judge(len(history) - 1, config)
        state, verdict = observe(state, event, config)
        assert verdict is not None
        expected = reference_extended.expected_warning(history, config, since)
        assert project(verdict.warning) == expected


# --- class 7: the conversation's own loops (contract §9.14, §9.15) --------------------
# The same rounds, with text steps of a few texts (carried as a fingerprint, or not
# carried at all) and condensations mixed in; the generators above are left as they were.

TEXTS = (RAW, RAW, f"{RAW} other", f" {RAW}\r\n", None)
"""`f" {RAW}\\r\\n"` normalises to RAW (§3): the same message."""
text_action = st.tuples(
    st.just("said"), st.tuples(st.sampled_from(TEXTS), st.sampled_from((0, 0, 0, 1)))
)
condensed_action = st.tuples(st.just("condensed"), st.none())
conversation_action = st.one_of(
    round_action, plain_action, text_action, text_action, text_action, condensed_action
)
conversations = st.lists(conversation_action, min_size=1, max_size=30)
conversation_configs = st.builds(
    lambda base, message, condensation: DetectionConfig(
        **{
            **base.model_dump(exclude_unset=True),
            "message_threshold": message,
            "condensation_threshold": condensation,
        }
    ),
    configs,
    st.integers(1, 4),
    st.integers(1, 4),
)


class Conversation(Rounds):
    def events(self, act: tuple[str, Any]) -> list[dict[str, Any]]:
        kind, arg = act
        if kind == "condensed":
            return [self._common("context_condensed")]
        if kind != "said":
            return super().events(act)
        text, carried = arg
        body = self._common("assistant_message")
        if text is not None and carried:
            body["text_fingerprint"] = text_fingerprint(text)
        elif text is not None:
            body["text"] = text
        return [body]


def build_conversation(acts: Sequence[tuple[str, Any]]) -> list[AgentEvent]:
    talk = Conversation()
    return [EVENT_ADAPTER.validate_python(raw) for act in acts for raw in talk.events(act)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=conversations, config=conversation_configs)
def test_core_matches_the_reference_on_text_loops_and_condensations(
    acts: list, config: DetectionConfig
) -> None:
    events = build_conversation(acts)
    replay = reference_extended.ReplaySession(config)
    state: SessionState | None = None
    for index, event in enumerate(events):
        _, expected = replay.feed(event)
        state, verdict = observe(state, event, config)
        assert verdict is not None
        context = "\n".join(e.model_dump_json() for e in events[: index + 1])
        assert project(verdict.warning) == expected, f"{config!r}\n{context}"
        if state is not None:  # and the snapshot carries digests only
            assert RAW not in json.dumps(state.to_snapshot())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=conversations)
def test_the_seed_judges_text_steps_and_condensations_as_the_seed_reference(acts: list) -> None:
    events = build_conversation(acts)
    seed = reference.ReplaySession(DetectionConfig())
    state: SessionState | None = None
    for event in events:
        _, expected = seed.feed(event)
        state, verdict = observe(state, event, DetectionConfig())
        assert verdict is not None and project(verdict.warning) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=conversations, config=conversation_configs)
def test_snapshot_round_trip_keeps_text_loop_verdicts(acts: list, config: DetectionConfig) -> None:
    events = build_conversation(acts)
    assert verdicts(events, config, round_trip=True) == verdicts(events, config)
