"""The wire contract: decoding, validation, fingerprints (pinned vectors), config, schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models import (
    ConfigError,
    DetectionConfig,
    InvalidEvent,
    ToolResult,
    call_fingerprint,
    decode_event,
    result_fingerprint,
)
from models.fingerprints import normalise
from models.schema import episode_schema, event_schema, verdict_schema

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

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
    }
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
