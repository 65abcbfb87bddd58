"""Warned model calls of a loop episode (docs/contract.md §8.3, issue 31's headline metric):
the core against the history re-scan (tests/support/reference.py `EpisodeReplay`), and
the scripted case of `make run`: a loop that changes course at the first model call that
sees the warning has `warned_calls` 1, however many verdicts repeated the warning."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.models import DetectionConfig, LoopEpisode
from loopwatch.streams.detector import SessionState, expire_episodes, observe_episodes
from tests.support import reference
from tests.support.builders import SessionBuilder
from tests.unit.detector.test_properties import (
    actions,
    build_session,
    configs,
    counterexample,
    decode,
    dense_action,
)


def _calls(raws: list, config: DetectionConfig, round_trip: bool = False) -> list[LoopEpisode]:
    replay = reference.EpisodeReplay(config)
    state: SessionState | None = None
    seen: list[LoopEpisode] = []
    for index, raw in enumerate(raws):
        event = decode(raw)
        expected = replay.feed(event)
        observation = observe_episodes(state, event, config)
        got = [(e.rule, e.first_seq, e.warned_calls) for e in observation.closed]
        want = [(e.rule, e.first_seq, e.warned_calls) for e in expected]
        assert got == want, counterexample(raws[: index + 1], config)
        seen.extend(observation.closed)
        state = observation.state
        if round_trip and state is not None:
            state = SessionState.from_snapshot(json.loads(json.dumps(state.to_snapshot())))
    expired = [] if state is None else list(expire_episodes(state, "s"))
    assert [e.warned_calls for e in expired] == [e.warned_calls for e in replay.expire()]
    return seen


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acts=actions, config=configs, round_trip=st.booleans())
def test_warned_calls_match_the_rescan(
    acts: list, config: DetectionConfig, round_trip: bool
) -> None:
    _calls(build_session(acts), config, round_trip)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    acts=st.lists(
        st.tuples(st.one_of(dense_action, st.just(("end", None))), st.just("next")), max_size=60
    ),
    config=configs,
)
def test_warned_calls_match_the_rescan_loop_dense(acts: list, config: DetectionConfig) -> None:
    _calls(build_session(acts), config)


def _episodes(s: SessionBuilder, config: DetectionConfig) -> list[LoopEpisode]:
    state: SessionState | None = None
    out: list[LoopEpisode] = []
    for event in s.events:
        observation = observe_episodes(state, event, config)
        state = observation.state
        out.extend(observation.closed)
    return out


def test_a_loop_that_changes_at_the_first_warned_call_counts_one() -> None:
    for config in (DetectionConfig(), DetectionConfig(profile="extended")):
        s = SessionBuilder()
        s.user()
        for _ in range(config.threshold):
            s.call("read_file", {"path": "a"})
            s.result(result="same")
        # the warning stands at the result and again at the next assistant message
        s.call("ls", {"dir": "."})  # the first model call that saw it: it moved on
        s.result(result="a b")
        episodes = {e.rule: e for e in _episodes(s, config)}
        assert set(episodes) == {"repeated_batch", "repeated_result"}
        assert all(e.outcome == "broken" and e.warned_calls == 1 for e in episodes.values())
        # what the page counted, and so called "not broken at the first warning"
        assert episodes["repeated_result"].warnings == 2


def test_a_loop_that_goes_on_counts_every_warned_call() -> None:
    s = SessionBuilder()
    s.user()
    for _ in range(6):
        s.call("read_file", {"path": "a"})
        s.result(result="same")
    s.call("ls", {"dir": "."})
    s.result(result="a b")
    episodes = {e.rule: e for e in _episodes(s, DetectionConfig())}
    assert episodes["repeated_result"].outcome == "broken"
    assert episodes["repeated_result"].warned_calls == 4  # the 4th, 5th, 6th call and `ls`


def test_an_episode_record_from_before_warned_calls_still_reads() -> None:
    record = {
        "v": 1, "type": "loop_episode", "session_id": "s", "agent_id": None,
        "rule": "repeated_result", "subject": "ab", "tool_names": ["x"], "first_seq": 1,
        "last_seq": 2, "started_at": "2026-01-01T00:00:00Z",
        "ended_at": "2026-01-01T00:00:01Z", "peak_count": 3, "warnings": 2,
        "outcome": "broken", "duration_seconds": 1.0,
    }  # fmt: skip
    assert LoopEpisode.model_validate(record).warned_calls is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    acts=st.lists(
        st.tuples(st.one_of(dense_action, st.just(("end", None))), st.just("next")), max_size=60
    ),
    after=st.integers(1, 3),
)
def test_levels_follow_the_warned_calls_of_the_rescan(acts: list, after: int) -> None:
    # contract §9.13 on the seed's rules: the level is 1 + warned calls // escalate_after
    # (at most 3) of the warned rule's episode, this event's model call included.
    config = DetectionConfig(escalation=True, escalate_after=after)
    replay = reference.EpisodeReplay(DetectionConfig())
    raws = build_session(acts)
    state: SessionState | None = None
    for index, raw in enumerate(raws):
        event = decode(raw)
        closed = replay.feed(event)
        observation = observe_episodes(state, event, config)
        state = observation.state
        warning = None if observation.verdict is None else observation.verdict.warning
        if warning is None:
            continue
        # the warned rule's episode after this event (closed by it at a session_end)
        episodes = [e for e in closed if e.rule == warning.rule and e.last_seq == event.seq]
        episode = replay.open.get(warning.rule) or episodes[-1]
        calls = 0 if episode.first_seq == event.seq else episode.warned_calls
        expected = 1 + min(2, calls // after)
        assert warning.level == expected, counterexample(raws[: index + 1], config)
