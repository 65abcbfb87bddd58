"""The bridge's pure parts on spans made by the OpenTelemetry SDK: decoding both
encodings, the GenAI mapping, the reorder window, turns, seq, and stale spans."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from loopwatch.models import AssistantMessage, ToolResult
from loopwatch.models.fingerprints import call_fingerprint, result_fingerprint
from loopwatch.streams.cli import main
from loopwatch.streams.otel.mapping import SpanRecord, to_record
from loopwatch.streams.otel.ordering import BridgeSession, admit, release
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.otel.spans import SpanDecodeError, decode_spans
from loopwatch.streams.settings import SettingsError
from tests.support.otel_spans import (
    CLEAN,
    EDIT,
    LOOPING,
    InstrumentedAgent,
    Tool,
    Turn,
    bridge_events,
    encode_request,
    export_records,
    raw_session,
    rules,
)


def agent(turns: Sequence[Turn], **options: object) -> InstrumentedAgent:
    instrumented = InstrumentedAgent(**options)  # type: ignore[arg-type]
    instrumented.run("conv-1", turns)
    return instrumented


@pytest.mark.parametrize("style", ["sibling", "child"])
def test_bridge_events_give_the_verdicts_of_the_raw_session(style: str) -> None:
    events = bridge_events(export_records(agent(LOOPING, style=style).spans()))
    expected = rules(raw_session(LOOPING))
    assert "repeated_read_range" in expected and "repeated_failed_mutation" in expected
    assert "repeated_batch" in expected
    assert rules(events) == expected
    assert [e.type for e in events] == [e.type for e in raw_session(LOOPING)]


def test_a_clean_agent_gets_no_warning() -> None:
    for style in ("sibling", "child"):
        events = bridge_events(export_records(agent(CLEAN, style=style).spans()))
        assert len(events) == len(raw_session(CLEAN))
        assert rules(events) == [None] * len(events)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_order_of_arrival_does_not_matter_within_the_window(seed: int, encoding: str) -> None:
    spans = agent(LOOPING, style="child").spans()
    in_order = bridge_events(export_records(spans, encoding), encoding)
    shuffled = bridge_events(export_records(spans, encoding, batch=2, shuffle=seed), encoding)
    assert shuffled == in_order


def test_both_encodings_decode_to_the_same_spans() -> None:
    spans = agent(LOOPING).spans()
    proto = decode_spans(encode_request(spans, "otlp_proto"), "otlp_proto")
    assert decode_spans(encode_request(spans, "otlp_json"), "otlp_json") == proto
    assert len(proto) == len(spans)
    assert {span.trace_id for span in proto} == {f"{spans[0].context.trace_id:032x}"}


def test_a_tool_span_maps_to_digests_of_its_call_and_result() -> None:
    tools = [Tool("bash", {"command": "make"}, result={"exit": 0}), EDIT]
    spans = decode_spans(encode_request(agent([tools]).spans()), "otlp_proto")
    records = [r for s in spans if (r := to_record(s, 7)) is not None]
    assert [r.kind for r in records] == ["chat", "tool", "tool"]  # invoke_agent is ignored
    chat, bash, edit = records
    assert chat.expects_tools and chat.session_id == "conv-1" and chat.agent_id == "coder"
    assert bash.call_fingerprint == call_fingerprint("bash", {"command": "make"})
    assert bash.result_fingerprint == result_fingerprint("bash", {"exit": 0}, None)
    assert bash.error is None and bash.call_id == "call_1" and bash.received_ms == 7
    assert edit.error == "ToolError"  # error.type; the message only in the fingerprint
    assert edit.result_fingerprint == result_fingerprint("edit_file", None, EDIT.error)
    assert "make" not in json.dumps([bash.encode().decode(), edit.encode().decode()])


def test_read_calls_keep_only_digests_of_their_target() -> None:
    read = Tool("read_file", {"path": "secret/plan.md", "offset": 100})
    spans = decode_spans(encode_request(agent([[read]]).spans()), "otlp_proto")
    record = next(r for s in spans if (r := to_record(s, 0)) is not None and r.kind == "tool")
    assert record.read_arguments is not None and record.read_arguments["offset"] == "100"
    assert "plan.md" not in record.encode().decode()


def test_without_conversation_id_the_session_is_the_trace() -> None:
    instrumented = InstrumentedAgent()
    instrumented.run(None, [[Tool("bash", {"command": "ls"})]])
    spans = instrumented.spans()
    events = bridge_events([encode_request(spans)])
    assert {e.session_id for e in events} == {f"{spans[0].context.trace_id:032x}"}


def test_unrecorded_content_is_never_taken_for_a_repetition() -> None:
    values = export_records(agent(LOOPING, record_content=False).spans())
    assert rules(bridge_events(values)) == [None] * len(raw_session(LOOPING))
    # `names`: calls with the same tool names count as the same (rule 4 on names)
    assert "repeated_batch" in rules(bridge_events(values, unrecorded="names"))


def test_replayed_and_late_spans_are_stale_and_never_emitted_again() -> None:
    values = export_records(agent(LOOPING).spans())
    records = [r for v in values for s in decode_spans(v, "otlp_proto") if (r := to_record(s, 0))]
    session: BridgeSession | None = None
    for record in records[:10]:
        session, admission = admit(session, record)
        assert admission == "pending"
    assert session is not None
    assert admit(session, records[3])[1] == "stale"  # the same span again, still pending
    session, first = release(session)
    newest_released = max(r.start_ns for r in records[:10])
    for record in records:  # a replay of everything: only spans after the horizon pass
        session, admission = admit(session, record)
        released_or_older = record.start_ns < newest_released or record in records[:10]
        assert (admission == "stale") == released_or_older
    session, rest = release(session)
    events = first + rest
    assert len(events) == len(raw_session(LOOPING))
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs)) and all(e.seq >= e.ts.timestamp() * 1e6 - 1 for e in events)
    session, again = release(BridgeSession.decode(session.encode()))
    assert again == []
    for record in records:
        assert admit(session, record)[1] == "stale"


def test_a_late_chat_span_does_not_reorder_what_was_released() -> None:
    spans = decode_spans(encode_request(agent([[EDIT]], style="child").spans()), "otlp_proto")
    records = [r for s in spans if (r := to_record(s, 0)) is not None]
    chat, tool = sorted(records, key=lambda r: r.kind)  # the child tool ends first
    session, events = release(admit(None, tool)[0])
    assert [type(e) for e in events] == [AssistantMessage, ToolResult]
    assert admit(session, chat)[1] == "stale"  # it started before the released tool span


def test_a_state_survives_its_snapshot() -> None:
    records = [
        r
        for s in decode_spans(encode_request(agent(CLEAN).spans()), "otlp_proto")
        if (r := to_record(s, 0)) is not None
    ]
    session: BridgeSession | None = None
    for record in records:
        session = admit(session, record)[0]
    assert session is not None
    assert BridgeSession.decode(session.encode()) == session
    assert SpanRecord.from_document(json.loads(records[0].encode())) == records[0]


@pytest.mark.parametrize(
    ("value", "encoding"),
    [
        (b"", "otlp_proto"),
        (b"\xff\xfe garbage", "otlp_proto"),
        (b'{"resourceSpans": []}', "otlp_proto"),
        (b"not json", "otlp_json"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "otlp_json"),
        (b'{"something": "else"}', "otlp_json"),
    ],
)
def test_records_that_are_not_otlp_requests_are_rejected(value: bytes, encoding: str) -> None:
    with pytest.raises(SpanDecodeError):
        decode_spans(value, encoding)  # type: ignore[arg-type]


def test_a_proto_record_read_as_json_is_rejected() -> None:
    with pytest.raises(SpanDecodeError):
        decode_spans(encode_request(agent(CLEAN).spans()), "otlp_json")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LOOPWATCH_OTEL_ENCODING", "jaeger_proto"),
        ("LOOPWATCH_OTEL_REORDER_WINDOW_MS", "-1"),
        ("LOOPWATCH_OTEL_REORDER_WINDOW_MS", "600001"),
        ("LOOPWATCH_OTEL_UNRECORDED", "maybe"),
        ("LOOPWATCH_OTEL_TOPIC", "bad topic"),
        ("LOOPWATCH_OTEL_APP_ID", "loopwatch"),
    ],
)
def test_bad_settings_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        OtelSettings.from_env({name: value})


def test_settings_defaults() -> None:
    settings = OtelSettings.from_env({})
    assert (settings.spans_topic, settings.encoding) == ("otlp_spans", "otlp_proto")
    assert settings.internal_topic == "loopwatch-otel-bridge-spans"


def test_the_command_stops_on_a_bad_setting_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOOPWATCH_OTEL_REORDER_WINDOW_MS", "soon")
    assert main(["otel-bridge"]) == 2
    assert "LOOPWATCH_OTEL_REORDER_WINDOW_MS" in capsys.readouterr().err
