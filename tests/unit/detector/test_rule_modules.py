"""The rule modules (`streams.detector.rules`): the protocol, the order, snapshots written
before the rules had modules, the subject of a hit, and adding a rule without touching
the others."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from typing import Any

from loopwatch.models import RULES, AgentEvent, DetectionConfig
from loopwatch.streams.detector import (
    ALL_RULES,
    DEFAULT_TEXTS,
    SEED_ORDER,
    SEED_RULES,
    Hit,
    Rule,
    RuleSet,
    SessionState,
    Tracker,
    advance,
    first_match,
    observe,
)
from tests.support.builders import SessionBuilder

# Written by the detector before it had rule modules (state version 1): after the 4th
# and after the 8th event of `_session()`.
OLD_SNAPSHOT_CHAIN = (
    '{"version": 1, "last_seq": 3, "last_ts": "2026-12-02T09:00:03+00:00", "calls": '
    '{"d0f631ca1ddba8db3bcfcb9e057cdc98": "6560ac2e6934fa646c9e865bdc2fd5e7", '
    '"9c0abe51c6e6655d81de2d044d4fb194": "23906984e77607f4922b2f68c862ea64", '
    '"7c1c97df17c066924822b0af09a65251": "6560ac2e6934fa646c9e865bdc2fd5e7", '
    '"0012a3fa000c5dc26ee658c3c58e12ce": "9a90174379bbd5a83535219a6ce04ff4"}, '
    '"result": [null, 0, false, ""], "chain": ["read_file", '
    '"548353296a4cfbd3524878647f3250f8", true, {"0": 3, "10": 1}, 3], '
    '"batch": ["386d638b0cd4bd2e24aff4e307f19d18", 1, ["read_file"]]}'
)
OLD_SNAPSHOT_RESULT = (
    '{"version": 1, "last_seq": 7, "last_ts": "2026-12-02T09:00:07+00:00", "calls": '
    '{"d0f631ca1ddba8db3bcfcb9e057cdc98": "6560ac2e6934fa646c9e865bdc2fd5e7", '
    '"9c0abe51c6e6655d81de2d044d4fb194": "23906984e77607f4922b2f68c862ea64", '
    '"7c1c97df17c066924822b0af09a65251": "6560ac2e6934fa646c9e865bdc2fd5e7", '
    '"0012a3fa000c5dc26ee658c3c58e12ce": "9a90174379bbd5a83535219a6ce04ff4", '
    '"d0bf3e6ee1d668de18c9ca200a4f1520": "50bc71abf1fd226cf753de46d03d2718", '
    '"6db53c9d5a2ca72a85ddf3a681c0d956": "50bc71abf1fd226cf753de46d03d2718"}, '
    '"result": ["50bc71abf1fd226cf753de46d03d2718:e8703a1a8f6771ae800361348f4a25f8", 2, '
    'true, "edit_file"], "chain": [null, "", false, {}, 0], '
    '"batch": ["01993dfc7fec19932467e9906389d81e", 2, ["edit_file"]]}'
)


def _session() -> list[AgentEvent]:
    b = SessionBuilder("s1")
    b.user("go")
    b.step(
        ("read_file", {"path": "a.py", "offset": 0}), ("read_file", {"path": "a.py", "offset": 10})
    )
    b.step(("read_file", {"path": "a.py", "offset": 0}))
    b.step(("read_file", {"path": "a.py"}))
    b.step(("edit_file", {"path": "a.py"}))
    b.result(error="boom")
    b.step(("edit_file", {"path": "a.py"}))
    b.result(error="boom")
    b.step(("edit_file", {"path": "a.py"}))
    b.result(error="boom")
    return b.events


def _state_after(events: list[AgentEvent], rules: RuleSet = SEED_RULES) -> SessionState:
    state: SessionState | None = None
    for event in events:
        state = advance(state, event, rules)
    assert state is not None
    return state


def test_the_seed_order_is_the_wire_vocabulary_and_each_rule_has_its_text() -> None:
    assert tuple(rule.name for rule in SEED_ORDER) == RULES
    for rule in SEED_ORDER:
        assert DEFAULT_TEXTS.templates[rule.name] == rule.template
        assert rule.tracker in SEED_RULES.trackers
    # Rules 1 and 2 read one run of results: one part, one snapshot key.
    assert [tracker.key for tracker in SEED_RULES.trackers] == ["result", "chain", "batch"]


def _with_episodes(old: str) -> dict[str, Any]:
    """A version 1 snapshot as version 2 writes it: the loop episode keys added."""
    upgraded: dict[str, Any] = json.loads(old)
    upgraded.update(version=2, step=[], episodes=[], loops=0)
    return upgraded


def test_the_snapshot_format_is_the_one_written_before_the_rule_modules() -> None:
    # ... plus, since version 2, the loop episodes' keys (docs/contract.md §8.4)
    events = _session()
    for old, upto in ((OLD_SNAPSHOT_CHAIN, 4), (OLD_SNAPSHOT_RESULT, 8)):
        state = _state_after(events[:upto])
        assert json.dumps(state.to_snapshot()) == json.dumps(_with_episodes(old))
        loaded = SessionState.from_snapshot(json.loads(old), SEED_RULES)
        assert loaded == state
        assert json.dumps(loaded.to_snapshot()) == json.dumps(_with_episodes(old))


def test_a_session_judged_by_the_seed_profile_keeps_the_seed_snapshot_format() -> None:
    # observe() keeps only what the rules in force read (docs/contract.md §9.1): no
    # tool-step state for the seed, so the snapshot is the seed's, byte for byte; a
    # policy running rule 6 for a while adds its key, the seed profile drops it again.
    events = _session()
    seed, extended = DetectionConfig(), DetectionConfig(profile="extended")
    for old, upto in ((OLD_SNAPSHOT_CHAIN, 4), (OLD_SNAPSHOT_RESULT, 8)):
        state: SessionState | None = None
        for event in events[:upto]:
            state, _ = observe(state, event, seed)
        assert state is not None and state.rules is SEED_RULES
        snapshot = state.to_snapshot()
        expected = _with_episodes(old)
        assert list(snapshot) == list(expected)  # the same keys, in the same order
        episodes = ("step", "episodes", "loops")  # observe() also tracks loop episodes
        assert json.dumps({k: v for k, v in snapshot.items() if k not in episodes}) == (
            json.dumps({k: v for k, v in expected.items() if k not in episodes})
        )
        loaded = SessionState.from_snapshot(json.loads(json.dumps(snapshot)))
        assert loaded.rules is SEED_RULES and loaded == state
    switched: SessionState | None = None
    for index, event in enumerate(events):
        switched, _ = observe(switched, event, extended if 2 <= index < 5 else seed)
        assert switched is not None
        snapshot = switched.to_snapshot()
        assert ("steps" in snapshot) == (2 <= index < 5), index
        assert ("batch" in snapshot) == (not 2 <= index < 5), index  # rule 4 result-aware
        again = SessionState.from_snapshot(json.loads(json.dumps(snapshot)))
        assert again.rules is switched.rules and again.to_snapshot() == snapshot


_TS = datetime(2026, 12, 2, 9, tzinfo=UTC)


def test_a_snapshot_loads_with_the_rules_whose_keys_it_has() -> None:
    """`from_snapshot` without rules keeps the trackers of `ALL_RULES` whose keys the
    snapshot has (remembered per key list): for every subset of the trackers, the set
    `ALL_RULES.keeping` gives, the same object each time, whatever the keys' order."""
    trackers = ALL_RULES.trackers
    for size in range(len(trackers) + 1):
        for kept in itertools.combinations(trackers, size):
            expected = ALL_RULES.keeping(kept)
            state = SessionState(0, _TS, {}, expected.empty_parts(), expected)
            snapshot = json.loads(json.dumps(state.to_snapshot()))
            loaded = SessionState.from_snapshot(snapshot)
            assert loaded.rules is expected and loaded == state
            backwards = dict(reversed(list(snapshot.items())))
            assert SessionState.from_snapshot(backwards).rules is expected


def test_a_state_loaded_from_an_old_snapshot_goes_on_as_if_never_saved() -> None:
    events = _session()
    config = DetectionConfig()
    loaded: SessionState | None = SessionState.from_snapshot(json.loads(OLD_SNAPSHOT_RESULT))
    kept: SessionState | None = _state_after(events[:8])
    for event in events[8:]:
        loaded, from_loaded = observe(loaded, event, config)
        kept, from_kept = observe(kept, event, config)
        assert from_loaded == from_kept
    assert from_loaded is not None and from_loaded.warning is not None


def test_the_subject_names_what_repeated_and_stays_the_same_while_it_repeats() -> None:
    config = DetectionConfig()
    events = _session()
    subjects: dict[str, set[str]] = {}
    state: SessionState | None = None
    for event in events:
        state = advance(state, event)
        match = first_match(state, config)
        if match is not None:
            subjects.setdefault(match.rule.name, set()).add(match.hit.subject)
            assert "a.py" not in match.hit.subject and "boom" not in match.hit.subject
    assert set(subjects) == {"repeated_read_range", "repeated_failed_mutation"}
    assert all(len(found) == 1 for found in subjects.values()), subjects

    other = SessionBuilder("s2")
    for _ in range(3):
        other.step(("edit_file", {"path": "b.py"}))
        other.result(error="boom")
    match = first_match(_state_after(other.events), config)
    assert match is not None and match.rule.name == "repeated_failed_mutation"
    assert match.hit.subject not in subjects["repeated_failed_mutation"]


class _UserTurns(Tracker[int]):
    """A tracker of a rule added by a test: counts user and system messages."""

    key = "turns"

    def empty(self) -> int:
        return 0

    def on_boundary(self, part: int) -> int:
        return part + 1

    def to_snapshot(self, part: int, *, copy: bool) -> Any:
        return part

    def from_snapshot(self, data: Any) -> int:
        return int(data)


class _ManyTurns(Rule[int]):
    name = "repeated_batch"  # the wire vocabulary is fixed; a real rule adds its name
    tracker = _UserTurns()
    template = "{count} turns"

    def check(self, part: int, config: DetectionConfig) -> Hit | None:
        return Hit(("none",), part, 2, "turns") if part >= 2 else None


def test_a_new_rule_is_one_module_and_one_line_in_the_order() -> None:
    extended = RuleSet((*SEED_ORDER, _ManyTurns()))
    assert extended.trackers[:3] == SEED_RULES.trackers
    assert [index for index, _ in extended.on_boundary] == [0, 1, 3]
    assert [index for index, _ in extended.on_result] == [0]  # only hooks it defines

    b = SessionBuilder("s1")
    b.user()
    b.text()
    b.user()
    state = _state_after(b.events, extended)
    match = first_match(state, DetectionConfig())
    assert match is not None and match.hit.count == 2
    snapshot = state.to_snapshot()
    assert snapshot["turns"] == 2
    assert SessionState.from_snapshot(snapshot, extended) == state
    # A snapshot written before the rule existed starts its tracker empty.
    old = SessionState.from_snapshot(json.loads(OLD_SNAPSHOT_CHAIN), extended)
    assert old.parts[3] == 0
    assert old.to_snapshot()["chain"] == json.loads(OLD_SNAPSHOT_CHAIN)["chain"]
