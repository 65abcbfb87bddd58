"""The wire contract: decoding, validation, fingerprints (pinned vectors), config, schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwatch.models import (
    EVENT_ADAPTER,
    ConfigError,
    DetectionConfig,
    InvalidEvent,
    ToolResult,
    call_fingerprint,
    decode_event,
    result_fingerprint,
)
from loopwatch.models.fingerprints import normalise
from loopwatch.models.schema import episode_schema, event_schema, verdict_schema

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

BASH_CARGO_TEST = "sha256:40d39e472be6e5bd359976a905c732cbce4beeaade5d408b7c63fc27a79fb640"
DEMO_VALUE_1 = "sha256:b2ef7dd0adef1ed7dbad196e8f582e211a4c13ab82c79a8afeb5517c11d46000"


def test_pinned_call_fingerprint() -> None:
    assert call_fingerprint("bash", {"cmd": "cargo test"}) == BASH_CARGO_TEST
    extra = {"cmd": "cargo test", "output": "....", "human_intent": "run the tests"}
    assert call_fingerprint("bash", extra) == BASH_CARGO_TEST


def test_pinned_result_fingerprint() -> None:
    assert result_fingerprint("demo", {"value": 1}, None) == DEMO_VALUE_1
    assert result_fingerprint("demo", {"value": 1, "duration_ms": 7}, None) == DEMO_VALUE_1
    assert result_fingerprint("demo", {"value": 1.0}, None) != DEMO_VALUE_1  # 1 and 1.0 differ
    assert result_fingerprint("demo", {"value": 1}, "boom") != DEMO_VALUE_1


def test_normalisation_rules() -> None:
    value = {"b": [" x \r\n y\t\r z  ", 1.0], "a": {"output": "dropped-not", "z": None}}
    assert normalise(value, ["human_intent"]) == {
        "a": {"output": "dropped-not", "z": None},
        "b": ["x\n y\n z", 1.0],
    }
    nested = {"k": [{"output": 1, "keep": True}]}
    assert normalise(nested, ["output"]) == {"k": [{"keep": True}]}
    # non-ASCII is encoded as UTF-8, not escaped
    assert call_fingerprint("t", {"s": "é"}) != call_fingerprint("t", {"s": "\\u00e9"})


def test_every_published_schema_version_fixture_parses() -> None:
    lines = (FIXTURES / "events-v1.jsonl").read_text().splitlines()
    events = [decode_event(line) for line in lines]
    assert [e.type for e in events] == [
        "user_message",
        "system_message",
        "assistant_message",
        "tool_result",
        "tool_result",
        "assistant_message",
        "session_end",
    ]
    assert all(e.v == 1 for e in events)
    failed = events[4]
    assert isinstance(failed, ToolResult) and failed.error == "exit 1"


def _event(**overrides: object) -> str:
    base: dict[str, object] = {
        "type": "user_message",
        "session_id": "s",
        "seq": 1,
        "ts": "2026-12-02T09:00:00Z",
    }
    base.update(overrides)
    return json.dumps({k: v for k, v in base.items() if v is not ...})


@pytest.mark.parametrize(
    ("record", "kind", "field"),
    [
        (b"\xff\xfe", "not_utf8", ""),
        (b"{not json", "not_json", ""),
        (b'{"x": NaN}', "not_json", ""),
        (_event(v=2), "schema", "v"),
        (_event(type="tool_call"), "schema", ""),
        (_event(ts="2026-12-02T09:00:00"), "schema", "ts"),
        (_event(ts=1700000000), "schema", "ts"),
        (_event(seq=-1), "schema", "seq"),
        (_event(seq="3"), "schema", "seq"),
        (_event(seq=True), "schema", "seq"),
        (_event(session_id=""), "schema", "session_id"),
        (_event(session_id="x" * 257), "schema", "session_id"),
        (_event(session_id=...), "schema", "session_id"),
        (
            _event(type="tool_result", call_id="c", tool_name="t", error=5),
            "schema",
            "error",
        ),
        (
            _event(
                type="assistant_message",
                tool_calls=[{"id": "a", "name": "t", "fingerprint": "md5:1"}],
            ),
            "schema",
            "fingerprint",
        ),
        (b"[1, 2]", "schema", ""),
    ],
)
def test_invalid_records_are_rejected_with_a_reason(
    record: str | bytes, kind: str, field: str
) -> None:
    with pytest.raises(InvalidEvent) as caught:
        decode_event(record)
    assert caught.value.kind == kind
    assert field in caught.value.reason


def test_reasons_never_echo_the_record_content() -> None:
    with pytest.raises(InvalidEvent) as caught:
        decode_event(
            _event(type="tool_result", call_id="c", tool_name="t", error={"secret": "TOKEN123"})
        )
    assert "TOKEN123" not in str(caught.value)


LONE = "ag\ud800"  # json.dumps writes it as the escape `\\ud800`


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (_event(agent_id=LONE), "agent_id"),
        (_event(session_id=LONE), "session_id"),
        (_event(text="\udfff"), "text"),
        (_event(some_extra_field=["ok", LONE]), "some_extra_field.1"),
        (_event(**{LONE: 1}), "(record) (a key)"),
        (
            _event(
                type="assistant_message",
                tool_calls=[{"id": "a", "name": "t", "arguments": {"q": {"deep": [LONE]}}}],
            ),
            "tool_calls.0.arguments",
        ),
        (
            _event(type="tool_result", call_id="c", tool_name="t", result={"k": LONE}),
            "result",
        ),
        (
            _event(type="tool_result", call_id="c", tool_name="t", result={LONE: "v"}),
            "result (a key)",
        ),
    ],
)
def test_lone_surrogates_are_a_schema_error_naming_the_field(record: str, field: str) -> None:
    assert "\\ud800" in record or "\\udfff" in record  # valid UTF-8, escaped in the JSON
    for data in (record, record.encode()):
        with pytest.raises(InvalidEvent) as caught:
            decode_event(data)
        assert caught.value.kind == "schema"
        # the field, never its content
        assert caught.value.reason == f"{field}: string is not valid Unicode (lone surrogate)"


def test_surrogate_pairs_and_escaped_backslashes_are_fine() -> None:
    paired = decode_event(_event(text="\U0001f600"))
    assert paired.text == "\U0001f600"  # type: ignore[union-attr]
    escaped = decode_event(_event(text="\\ud800"))
    assert escaped.text == "\\ud800"  # type: ignore[union-attr]
    raw = _event(agent_id="x").replace('"x"', '"x\udc00"')  # a raw surrogate in a str
    with pytest.raises(InvalidEvent, match="agent_id"):
        decode_event(raw)


def test_defaults_and_extras() -> None:
    event = decode_event(
        _event(type="assistant_message", tool_calls=[{"id": "a", "name": "ls"}], extra=1)
    )
    assert event.v == 1
    assert event.tool_calls[0].arguments == {}  # type: ignore[union-attr]
    assert decode_event(_event(seq=0)).seq == 0
    assert decode_event(_event(session_id="x" * 256)).session_id == "x" * 256


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"threshold": True}, "threshold must be an integer >= 1, got True"),
        ({"threshold": 2.0}, "threshold must be an integer >= 1, got 2.0"),
        ({"threshold": "3"}, "threshold must be an integer >= 1, got '3'"),
        ({"threshold": 0}, "threshold must be an integer >= 1, got 0"),
        (
            {"mutating_failure_threshold": False},
            "mutating_failure_threshold must be an integer >= 1, got False",
        ),
        (
            {"mutating_failure_threshold": -1},
            "mutating_failure_threshold must be an integer >= 1, got -1",
        ),
        ({"thresold": 3}, "unknown config key 'thresold'"),
    ],
)
def test_config_rejects_bad_values_naming_key_and_value(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        DetectionConfig(**values)
    assert str(caught.value) == message


def test_config_defaults() -> None:
    config = DetectionConfig()
    assert (config.threshold, config.mutating_failure_threshold) == (3, 2)
    assert (
        DetectionConfig(threshold=1, mutating_failure_threshold=7).mutating_failure_threshold == 7
    )


def test_json_schemas_describe_the_contract() -> None:
    events = event_schema()
    assert events["$schema"].endswith("2020-12/schema")
    assert set(events["discriminator"]["mapping"]) == {
        "user_message",
        "system_message",
        "assistant_message",
        "tool_result",
        "session_end",
        "context_condensed",  # contract 1.3
    }
    said = events["$defs"]["AssistantMessage"]["properties"]
    assert "text_fingerprint" in said and "text_fingerprint" not in events["$defs"][
        "AssistantMessage"
    ].get("required", [])
    verdicts = verdict_schema()
    assert set(verdicts["required"]) >= {"session_id", "seq", "warning", "event_ts"}
    episodes = episode_schema()
    assert set(episodes["required"]) >= {
        "session_id", "agent_id", "rule", "subject", "tool_names", "first_seq", "last_seq",
        "started_at", "ended_at", "peak_count", "warnings", "outcome", "duration_seconds",
    }  # fmt: skip
    assert episodes["properties"]["outcome"]["enum"] == ["broken", "session_ended", "expired"]
    # stable, distinct ids that name the record and its version (docs/contract.md §1)
    assert events["$id"].endswith("/agent-event/v1.json")
    assert verdicts["$id"].endswith("/loop-verdict/v1.json")
    assert episodes["$id"].endswith("/loop-episode/v1.json")


_PARSER_EDGES = [
    {"big": 123456789012345678901234567890, "float": 0.1, "tiny": 1.5e-320, "neg": -0.0},
    {"one": 1, "one_point_o": 1.0, "exp": 1e2, "overflow": "1e400", "nested": [[[{"a": None}]]]},
    {"dup": "first", "unicode": "naïve ✓ 漢字", "control": "\u0000\t", "empty": {}},
]


@pytest.mark.parametrize("result", _PARSER_EDGES)
def test_the_fast_parser_decodes_exactly_as_json_does(result: object) -> None:
    record = _event(type="tool_result", call_id="c", tool_name="t", result=result)
    record = record.replace('"dup": "first"', '"dup": "first", "dup": "last"')
    record = record.replace('"overflow": "1e400"', '"overflow": 1e400')
    expected = EVENT_ADAPTER.validate_python(json.loads(record))
    decoded = decode_event(record.encode())
    assert decoded == expected
    assert repr(decoded.result) == repr(expected.result)  # -0.0, 1.0 vs 1, inf


def test_records_the_fast_parser_refuses_get_the_outcome_json_gives() -> None:
    surrogate = _event(text="\ud800")  # an escaped lone surrogate: json takes it
    assert "\\ud800" in surrogate
    # json's parse, then the lone-surrogate check (docs/contract.md §7): a schema error
    with pytest.raises(InvalidEvent) as refused:
        decode_event(surrogate.encode())
    assert (refused.value.kind, refused.value.reason) == (
        "schema",
        "text: string is not valid Unicode (lone surrogate)",
    )
    with pytest.raises(InvalidEvent) as as_str:
        decode_event(surrogate.replace("\\ud800", "\ud800"))  # a str holding one
    assert as_str.value.kind == "schema"
    with pytest.raises(InvalidEvent) as caught:
        decode_event(b'{"type": "user_message", "x": Infinity}')
    assert caught.value.kind == "not_json"


def test_the_fixture_events_decode_as_with_json() -> None:
    lines = [line for line in (FIXTURES / "events-v1.jsonl").read_bytes().splitlines()]
    lines = [line for line in lines if line.strip()]
    assert lines
    for line in lines:
        assert decode_event(line) == EVENT_ADAPTER.validate_python(json.loads(line))
