"""Loop episodes (docs/contract.md §8): the incremental core against the history re-scan
in tests/support/reference.py (`EpisodeReplay`), on the generated sessions of test_properties;
known answers; bounded state; snapshots (mid-session round trips, version 1 loading).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.models import (
    RULES,
    DetectionConfig,
    LoopEpisode,
    call_fingerprint,
    result_fingerprint,
)
from loopwatch.streams.detector import (
    SessionState,
    expire_episodes,
    observe_episodes,
)
from tests.support import reference
from tests.unit.detector.test_properties import (
    CALLS,
    RAW,
    RESULTS,
    _plain,
    _result,
    _step,
    actions,
    build_session,
    configs,
    counterexample,
    decode,
    dense_action,
)


def _project(episode: LoopEpisode) -> tuple[Any, ...]:
    return (
        episode.rule,
        episode.tool_names,
        episode.agent_id,
        episode.first_seq,
        episode.started_at,
        episode.last_seq,
        episode.ended_at,
        episode.peak_count,
        episode.warnings,
        episode.outcome,
    )


def _project_expected(episode: reference.ExpectedEpisode) -> tuple[Any, ...]:
    return (
        episode.rule,
        tuple(episode.tool_names),
        episode.agent_id,
        episode.first_seq,
        episode.started_at,
        episode.last_seq,
        episode.ended_at,
        episode.peak_count,
        episode.warnings,
        episode.outcome,
    )


class _Subjects:
    """Core subjects are digests, reference subjects the compared values themselves:
    they must correspond one to one (per rule), so equal means equal on both sides."""

    def __init__(self) -> None:
        self.core_of: dict[tuple[str, Any], str] = {}
        self.ref_of: dict[tuple[str, str], Any] = {}

    def check(self, rule: str, core: str, ref: Any, context: str) -> None:
        assert self.core_of.setdefault((rule, ref), core) == core, context
        assert self.ref_of.setdefault((rule, core), ref) == ref, context


def check_episodes(
    raws: Sequence[dict[str, Any]], config: DetectionConfig, *, round_trip: bool = False
) -> list[LoopEpisode]:
    replay = reference.EpisodeReplay(config)
    subjects = _Subjects()
    state: SessionState | None = None
    seen: list[LoopEpisode] = []
    for index, raw in enumerate(raws):
        event = decode(raw)
        expected = replay.feed(event)
        observation = observe_episodes(state, event, config)
        context = counterexample(raws[: index + 1], config)
        got = list(observation.closed)
        assert [_project(e) for e in got] == [_project_expected(e) for e in expected], context
        for core, ref in zip(got, expected, strict=True):
            subjects.check(core.rule, core.subject, ref.subject, context)
            assert core.duration_seconds == (core.ended_at - core.started_at).total_seconds()
            assert RAW not in core.to_json().decode(), context
        for opened in observation.opened:
            assert opened.first_seq == event.seq, context
        seen.extend(got)
        state = observation.state
        if state is not None:
            assert len(state.episodes) <= len(RULES), context
            assert len({e.rule for e in state.episodes}) == len(state.episodes), context
            assert [e.rule for e in state.episodes] == [
                r for r in RULES if r in {e.rule for e in state.episodes}
            ], context
            for episode in state.episodes:
                assert replay.open[episode.rule].first_seq == episode.first_seq, context
            if round_trip:
                state = SessionState.from_snapshot(json.loads(json.dumps(state.to_snapshot())))
        else:
            assert not replay.open, context
    # what is still open expires with the state
    expired = [] if state is None else list(expire_episodes(state, "s"))
    assert [_project(e) for e in expired] == [_project_expected(e) for e in replay.expire()]
    return seen + expired


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=actions, config=configs)
def test_episodes_match_history_rescan(acts: list, config: DetectionConfig) -> None:
    check_episodes(build_session(acts), config)


# Loop-dense sessions with results answering each step's calls: long loops, all outcomes.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    acts=st.lists(
        st.tuples(st.one_of(dense_action, st.just(("end", None))), st.just("next")), max_size=60
    ),
    config=configs,
)
def test_episodes_match_history_rescan_loop_dense(acts: list, config: DetectionConfig) -> None:
    check_episodes(build_session(acts), config)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=actions, config=configs)
def test_episodes_survive_snapshot_round_trips(acts: list, config: DetectionConfig) -> None:
    check_episodes(build_session(acts), config, round_trip=True)


def test_known_answers() -> None:
    config = DetectionConfig()
    # A call repeated with the same result: rule 4 warns at the third step (seq 4), rule 2
    # at its result (seq 5), at the fourth step (seq 6, count unchanged), its result
    # (seq 7, count 4) and the next step (seq 8: the newest result is unchanged). That
    # step's result (seq 9) completes a step in which neither rule fires any more: both
    # episodes break there. Peaks count warnings only (rule 4 was shadowed after seq 4).
    acts = [_step(26), _result(), _step(26), _result(), _step(26), _result()]
    acts += [_step(26), _result(), _step(27), _result(result=5), _plain("end")]
    episodes = check_episodes(build_session(acts), config)
    got = {(e.rule, e.first_seq, e.last_seq, e.peak_count, e.warnings, e.outcome) for e in episodes}
    assert got == {
        ("repeated_result", 5, 9, 4, 4, "broken"),
        ("repeated_batch", 4, 9, 3, 1, "broken"),
    }

    # Still looping at session_end: session_ended, at the end event.
    acts = [_step(26), _result(), _step(26), _result(), _step(26), _result(), _plain("end")]
    episodes = check_episodes(build_session(acts), config)
    assert {(e.rule, e.last_seq, e.outcome) for e in episodes} == {
        ("repeated_result", 6, "session_ended"),
        ("repeated_batch", 6, "session_ended"),
    }

    # A step whose result never arrives does not complete: the episode stays open and
    # expires at its last warning (rule 2 still warned at that step, seq 6).
    acts = [_step(26), _result(), _step(26), _result(), _step(26), _result(), _step(27)]
    episodes = check_episodes(build_session(acts), config)
    assert {(e.rule, e.last_seq, e.outcome) for e in episodes} == {
        ("repeated_result", 6, "expired"),
        ("repeated_batch", 4, "expired"),
    }

    # A user message alone breaks nothing; the next completed step decides (rule 1's run
    # restarted after the user; rule 4's run of batches goes on across it and warns at
    # seq 5, until the different edit's result completes a step at seq 8).
    acts = [_step(20), _result(1), _step(20), _result(1), _plain("user"), _step(20), _result(1)]
    acts += [_step(21), _result(1)]
    episodes = check_episodes(build_session(acts), config)
    assert [(e.rule, e.first_seq, e.last_seq, e.outcome) for e in episodes] == [
        ("repeated_failed_mutation", 3, 6, "broken"),
        ("repeated_batch", 5, 8, "broken"),
    ]


def test_state_stays_bounded_over_a_long_looping_session() -> None:
    config = DetectionConfig()
    acts = [_step(26), _result()] * 3 + [_step(0, 4), _step(1), _step(2), _plain("text")]
    acts = [*acts, _plain("user")] * 300
    state: SessionState | None = None
    sizes = []
    for raw in build_session(acts):
        state = observe_episodes(state, decode(raw), config).state
        assert state is not None
        assert len(state.episodes) <= len(RULES)
        sizes.append(len(json.dumps(state.to_snapshot())))
    assert max(sizes[len(sizes) // 2 :]) <= max(sizes[: len(sizes) // 2])
    assert state.loops > 300  # it kept opening (and closing) episodes


def test_a_version_1_snapshot_loads_without_episodes() -> None:
    config = DetectionConfig()
    acts = [_step(26), _result(), _step(26), _result(), _step(26), _result()]
    state: SessionState | None = None
    for raw in build_session(acts):
        state = observe_episodes(state, decode(raw), config).state
    assert state is not None and state.episodes
    old = state.to_snapshot()
    for key in ("step", "episodes", "loops"):
        del old[key]
    old["version"] = 1
    loaded = SessionState.from_snapshot(old)
    assert loaded.episodes == () and loaded.step_pending == () and loaded.loops == 0
    assert loaded.parts == state.parts and loaded.calls == state.calls


def test_subjects_are_the_documented_digests() -> None:
    """docs/contract.md §8.1: 16 hex digits of SHA-256 of the rule's subject key."""

    def sha(text: str, chars: int) -> str:
        return hashlib.sha256(text.encode()).hexdigest()[:chars]

    config = DetectionConfig()
    # Rule 3: reads of a.py at ranges 0, 40, 0, 0 (CALLS 0, 4, 1, 2), then a search.
    acts = [_step(0, 4), _step(1), _step(2), _step(26), _plain("end")]
    [episode] = check_episodes(build_session(acts), config)
    assert episode.rule == "repeated_read_range"
    assert episode.subject == sha(sha("read_file\0a.py", 32), 16)
    # Rule 2: the signature key is the 32-hex-digit call and result fingerprint prefixes.
    acts = [_step(26), _result(), _step(26), _result(), _step(26), _result(), _plain("end")]
    result = next(
        e for e in check_episodes(build_session(acts), config) if e.rule != "repeated_batch"
    )
    call = call_fingerprint(*CALLS[26])[7:39]
    answer = result_fingerprint("search", RESULTS[1], None)[7:39]
    assert result.subject == sha(f"{call}:{answer}", 16)
