"""Agent loops for the otel-bridge tests, made by the instrumented agent of
ops/bench/otel_agent.py (which the otel bench shares), and what the bridge and the scan
make of them."""

from __future__ import annotations

from collections.abc import Sequence

from loopwatch.models import AgentEvent, DetectionConfig
from loopwatch.streams.otel.mapping import Unrecorded, to_record
from loopwatch.streams.otel.ordering import BridgeSession, admit, release
from loopwatch.streams.otel.spans import Encoding, decode_spans
from loopwatch.streams.scan.scanner import Scanner
from ops.bench.otel_agent import InstrumentedAgent, Tool, Turn, encode_request, export_records
from tests.support.builders import SessionBuilder

__all__ = [  # what the tests use from here
    "CLEAN",
    "EDIT",
    "LOOPING",
    "InstrumentedAgent",
    "Tool",
    "Turn",
    "bridge_events",
    "encode_request",
    "export_records",
    "raw_session",
    "rules",
]

# -- agents that loop and agents that do not, and what the bridge makes of them -----------

EDIT = Tool("edit_file", {"path": "a.py", "old": "x", "new": "y"}, error="old text not found")
LOOPING: list[Turn] = [
    [Tool("read_file", {"path": "a.py", "offset": 0}, result="text 0")],
    [Tool("read_file", {"path": "a.py", "offset": 100}, result="text 100")],
    [Tool("read_file", {"path": "a.py", "offset": 0}, result="text 0")],
    [Tool("read_file", {"path": "a.py", "offset": 0}, result="text 0")],
    [EDIT],
    [EDIT],
    [Tool("search", {"q": "x"}, result=[]), Tool("grep", {"p": "x"}, result=[])],
    [Tool("grep", {"p": "x"}, result=[]), Tool("search", {"q": "x"}, result=[])],
    [Tool("search", {"q": "x"}, result=[]), Tool("grep", {"p": "x"}, result=[])],
]
CLEAN: list[Turn] = [
    [Tool("read_file", {"path": "a.py"}, result="a"), Tool("read_file", {"path": "b.py"})],
    [Tool("edit_file", {"path": "a.py", "old": "1", "new": "2"}, error="no match")],
    [Tool("edit_file", {"path": "a.py", "old": "one", "new": "two"}, result="edited")],
    [Tool("bash", {"command": "make test"}, result="ok")],
    [],
]


def bridge_events(
    values: Sequence[bytes], encoding: Encoding = "otlp_proto", unrecorded: Unrecorded = "distinct"
) -> list[AgentEvent]:
    """Every record admitted (record time = its index), then each session released."""
    sessions: dict[str, BridgeSession] = {}
    for index, value in enumerate(values):
        for span in decode_spans(value, encoding):
            record = to_record(span, index, unrecorded)
            if record is not None:
                sessions[record.session_id], _ = admit(sessions.get(record.session_id), record)
    events: list[AgentEvent] = []
    for session in sessions.values():
        events += release(session)[1]
    return events


def rules(events: Sequence[AgentEvent]) -> list[str | None]:
    return [
        None if v.warning is None else v.warning.rule
        for v in Scanner(DetectionConfig()).run(list(events))
    ]


def raw_session(turns: Sequence[Turn], session_id: str = "conv-1") -> list[AgentEvent]:
    """What a runtime would publish for the same turns, with raw arguments and results."""
    builder = SessionBuilder(session_id, agent_id="coder")
    calls = 0
    for turn in turns:
        if not turn:
            builder.text("done")
            continue
        builder.step(*((tool.name, tool.arguments) for tool in turn))
        for tool in turn:
            calls += 1
            result = None if tool.error else tool.result
            builder.result(tool.name, result=result, error=tool.error, call_id=f"c{calls}")
    return builder.events
