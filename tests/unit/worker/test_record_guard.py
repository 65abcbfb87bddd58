"""No record stops a partition: whatever bytes or JSON arrive, the per-record pipeline
(`process_record`) returns an outcome and never raises (hypothesis): lone surrogates,
NaN, huge integers, deep nesting, any field of an event replaced by any JSON value. Such
input is a verdict, a duplicate or a dead letter of its own kind (`schema`, `not_json`, ...),
never an `internal` one. A failure anywhere inside (decode, observe, verdict encoding,
state encoding, expiry) is an `internal` dead letter naming the exception type."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.models import TOO_DEEP, LoopVerdict
from loopwatch.streams.worker.pipeline import (
    Duplicate,
    Outcome,
    Processed,
    Rejected,
)
from loopwatch.streams.worker.record import SessionRecord
from loopwatch.streams.worker.table_store import TableSessionStore
from tests.support.builders import SessionBuilder
from tests.support.pipeline import Pipeline, expiry_index, options


def run(key: bytes | None, value: bytes | None, table: dict[bytes, bytes] | None = None) -> Outcome:
    """One record through the pipeline over the faust table's store (over a dict: state
    is encoded as in the worker)."""
    pipeline = Pipeline(
        TableSessionStore({} if table is None else table),
        options=options(max_event_bytes=1 << 20),
        expiry=expiry_index(ended=timedelta(0)),
    )
    outcome = pipeline.process(key, value)
    assert isinstance(outcome, Processed | Duplicate | Rejected)
    if isinstance(outcome, Processed):
        json.loads(outcome.payload)  # a verdict that went out is valid JSON
    return outcome


def judged(
    key: bytes | None, value: bytes | None, table: dict[bytes, bytes] | None = None
) -> Outcome:
    """`run`, and odd input is never an `internal` dead letter: that kind is a failure
    inside processing (a bug, e.g. the detector raising), never a verdict on the input."""
    outcome = run(key, value, table)
    if isinstance(outcome, Rejected):
        assert outcome.letter.kind != "internal", f"internal dead letter: {outcome.letter.reason}"
    return outcome


# Text, and text with a lone surrogate in it (json.dumps escapes it as \udxxx).
_text = st.one_of(
    st.text(max_size=12),
    st.builds(
        lambda head, lone, tail: head + lone + tail,
        st.text(max_size=4),
        st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]),
        st.text(max_size=4),
    ),
)
_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**40), max_value=10**40),
        st.floats(),  # NaN and infinities included: json.dumps writes NaN/Infinity
        _text,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
    max_leaves=25,
)


def _valid_events() -> list[dict[str, Any]]:
    b = SessionBuilder("s-guard", agent_id="agent")
    events = [b.user("go"), b.step(("read_file", {"path": "a.py"})), b.result(result="text")]
    return [e.model_dump(mode="json") for e in events]


VALID = _valid_events()


@settings(max_examples=300, deadline=None)
@given(value=st.binary(max_size=300), key=st.one_of(st.none(), st.binary(max_size=16)))
def test_any_bytes_give_an_outcome(value: bytes, key: bytes | None) -> None:
    judged(key, value)


@settings(max_examples=300, deadline=None)
@given(document=_json)
def test_any_json_value_gives_an_outcome(document: Any) -> None:
    judged(None, json.dumps(document).encode())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(VALID) - 1), field=st.data(), value=_json)
def test_any_field_of_an_event_replaced_by_any_json_gives_an_outcome(
    index: int, field: st.DataObject, value: Any
) -> None:
    event = dict(VALID[index])
    name = field.draw(st.sampled_from([*sorted(event), "arguments", "extra"]))
    if name == "arguments" and event.get("tool_calls"):
        event["tool_calls"] = [{**event["tool_calls"][0], "arguments": value}]
    else:
        event[name] = value
    table: dict[bytes, bytes] = {}
    for earlier in VALID[:index]:  # the session's history first: observe has state
        assert isinstance(judged(b"s-guard", json.dumps(earlier).encode(), table), Processed)
    judged(None, json.dumps(event).encode(), table)


@pytest.mark.parametrize("depth", [50, 500, 990, 5_000, 100_000])
def test_deep_nesting_gives_an_outcome(depth: int) -> None:
    """~500 levels pass json.loads (its limit is ~990) but not the normalisation of the
    fingerprint: a schema dead letter saying so, as deeper ones are not_json ones."""
    nested = "[" * depth + "]" * depth
    call = f'{{"id":"c","name":"t","arguments":{nested}}}'
    value = (
        '{"type":"assistant_message","session_id":"deep","seq":0,'
        f'"ts":"2026-12-03T12:00:00Z","tool_calls":[{call}]}}'
    )
    outcome = judged(b"deep", value.encode())
    if depth == 500:
        assert isinstance(outcome, Rejected)
        assert (outcome.letter.kind, outcome.letter.reason) == ("schema", TOO_DEEP.reason)


def test_lone_surrogate_is_a_schema_dead_letter() -> None:
    value = (
        b'{"type":"user_message","session_id":"s","seq":0,"ts":"2026-12-03T12:00:00Z",'
        b'"agent_id":"ag\\ud800"}'
    )
    outcome = run(b"s", value)
    assert isinstance(outcome, Rejected)
    assert outcome.letter.kind == "schema"
    assert outcome.letter.reason.startswith("agent_id: ")


def test_a_failing_verdict_encoding_is_an_internal_dead_letter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: LoopVerdict) -> bytes:
        raise UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(LoopVerdict, "to_json", broken)
    outcome = run(b"s-guard", json.dumps(VALID[0]).encode())
    assert isinstance(outcome, Rejected)
    assert (outcome.letter.kind, outcome.letter.reason) == ("internal", "UnicodeEncodeError")


def test_a_failing_state_encoding_is_an_internal_dead_letter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: SessionRecord) -> bytes:
        raise ValueError("cannot encode")

    monkeypatch.setattr(SessionRecord, "encode", broken)
    outcome = run(b"s-guard", json.dumps(VALID[0]).encode())
    assert isinstance(outcome, Rejected)
    assert (outcome.letter.kind, outcome.letter.reason) == ("internal", "ValueError")


def test_a_corrupt_stored_state_is_an_internal_dead_letter_and_the_next_session_goes_on() -> None:
    table = {b"s-guard": b"{not a session record"}
    outcome = run(b"s-guard", json.dumps(VALID[0]).encode(), table)
    assert isinstance(outcome, Rejected) and outcome.letter.kind == "internal"
    other = dict(VALID[0], session_id="other")
    assert isinstance(run(b"other", json.dumps(other).encode(), table), Processed)
