"""A GenAI span → a `SpanRecord`: the session it belongs to and digests of what it did.

The exact mapping is docs/contract.md §10. A record holds no raw content: arguments and
results become docs/contract.md §3 fingerprints here, read calls keep only digests of their targets
and their range, and a failure keeps its `error.type` (a class, not a message).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

from loopwatch.models.fingerprints import call_fingerprint, digest, result_fingerprint
from loopwatch.streams.detector.rules.repeated_read_range import read_range, read_resource
from loopwatch.streams.detector.tools import short_digest
from loopwatch.streams.otel.spans import STATUS_ERROR, Span

SpanKind = Literal["chat", "tool"]
Unrecorded = Literal["distinct", "names"]
"""What an unrecorded argument or result counts as: `distinct` (default) never equal to
another; `names` equal for the same tool name (the contract's fingerprint of `{}` / null)."""

OPERATION = "gen_ai.operation.name"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
FINISH_REASONS = "gen_ai.response.finish_reasons"
ERROR_TYPE = "error.type"

_OPERATIONS: dict[str, SpanKind] = {
    "execute_tool": "tool",
    "chat": "chat",
    # the conventions' other model-call operations (Gemini/Vertex instrumentations name
    # their calls so): a model call is a chat span, whatever its API
    "generate_content": "chat",
    "text_completion": "chat",
}
_TOOL_FINISH_REASONS = frozenset({"tool_calls", "tool_use", "function_call"})
MAX_SESSION_ID_CHARS = 256
UNNAMED_ERROR = "error"
"""`error` of a failed tool result whose span has no `error.type`."""


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One GenAI span, keyed by session: the bridge's internal record and pending state."""

    session_id: str
    agent_id: str | None
    span_id: str
    """Trace id + span id (hex): unique across traces."""
    parent_id: str
    """Trace id + parent span id, or empty for a root span."""
    kind: SpanKind
    start_ns: int
    end_ns: int
    received_ms: int
    """Kafka timestamp of the exporter record that carried the span: the Collector's
    clock, which the bridge does not go by (contract §10.5); a stand-in only where no
    other time exists (pure replays of records, a record without a timestamp)."""
    expects_tools: bool = False
    """chat: its finish reasons say the model asked for tools."""
    tool_name: str = ""
    call_id: str = ""
    call_fingerprint: str = ""
    result_fingerprint: str = ""
    error: str | None = None
    read_arguments: dict[str, Any] | None = None
    """Read calls only: digests of `path`/`paths` and the range (docs/contract.md §4 rule 3)."""

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> SpanRecord:
        return cls(**document)


def span_kind(span: Span) -> SpanKind | None:
    """`chat` (a model call: chat, generate_content, text_completion), `tool`
    (execute_tool), or None for any other span (not used)."""
    operation = span.attributes.get(OPERATION)
    if not isinstance(operation, str):
        operation = span.name.split(" ", 1)[0]  # the conventions' span name prefix
    return _OPERATIONS.get(operation)


def to_record(
    span: Span, received_ms: int, unrecorded: Unrecorded = "distinct"
) -> SpanRecord | None:
    """The record of a GenAI span; None for a span the bridge does not map."""
    kind = span_kind(span)
    if kind is None:
        return None
    attributes = span.attributes
    common: dict[str, Any] = {
        "session_id": session_of(span),
        "agent_id": _text(attributes.get(AGENT_ID)) or _text(attributes.get(AGENT_NAME)),
        "span_id": span.trace_id + span.span_id,
        "parent_id": span.trace_id + span.parent_span_id if span.parent_span_id else "",
        "kind": kind,
        "start_ns": span.start_ns,
        "end_ns": max(span.end_ns, span.start_ns),
        "received_ms": received_ms,
    }
    if kind == "chat":
        reasons = attributes.get(FINISH_REASONS)
        expects = isinstance(reasons, list) and bool(_TOOL_FINISH_REASONS.intersection(reasons))
        return SpanRecord(**common, expects_tools=expects)
    tool_name = _text(attributes.get(TOOL_NAME)) or _text(span.name.partition(" ")[2])
    if tool_name is None:
        return None  # an execute_tool span that does not say which tool
    return SpanRecord(**common, **_tool_fields(span, tool_name, unrecorded, common["span_id"]))


def session_of(span: Span) -> str:
    """`gen_ai.conversation.id` (a digest when longer than a session id may be), else the
    trace id."""
    conversation = _text(span.attributes.get(CONVERSATION_ID))
    if conversation is None:
        return span.trace_id
    if len(conversation) > MAX_SESSION_ID_CHARS:
        return "conversation-" + short_digest(conversation)
    return conversation


def _tool_fields(span: Span, tool_name: str, unrecorded: Unrecorded, ident: str) -> dict[str, Any]:
    attributes = span.attributes
    error_type = _text(attributes.get(ERROR_TYPE))
    failed = span.status_code == STATUS_ERROR or error_type is not None
    # The fingerprint tells failures apart by their message; the event keeps the class.
    error_text = (span.status_message or error_type or UNNAMED_ERROR) if failed else None
    arguments, result = attributes.get(TOOL_ARGUMENTS), attributes.get(TOOL_RESULT)
    if arguments is not None:
        arguments = _json_or_text(arguments)
        call = call_fingerprint(tool_name, arguments)
    elif unrecorded == "names":
        call = call_fingerprint(tool_name, {})
    else:
        call = digest({"unrecorded_call": ident})
    if result is not None or failed or unrecorded == "names":
        outcome = None if result is None else _json_or_text(result)
        result_digest = result_fingerprint(tool_name, outcome, error_text)
    else:
        result_digest = digest({"unrecorded_result": ident})
    return {
        "tool_name": tool_name,
        "call_id": _text(attributes.get(TOOL_CALL_ID)) or ident,
        "call_fingerprint": call,
        "result_fingerprint": result_digest,
        "error": (error_type or UNNAMED_ERROR) if failed else None,
        "read_arguments": None if arguments is None else _read_arguments(tool_name, arguments),
    }


def _read_arguments(tool_name: str, arguments: Any) -> dict[str, Any] | None:
    """What rule 3 compares of a read call, with the target digested: equal digests for
    equal targets, so the rule decides exactly as on the raw arguments."""
    resource = read_resource(tool_name, arguments)
    if resource is None:
        return None
    target = short_digest(resource)  # the detector reads `path` or `paths` by tool name
    return {"path": target, "paths": [target], "offset": read_range(arguments)}


def _json_or_text(value: Any) -> Any:
    """Instrumentations record arguments and results as JSON text (or structured values)."""
    if isinstance(value, str):
        try:
            return json.loads(value, parse_constant=_not_json)
        except ValueError:
            return value
    return value


def _not_json(constant: str) -> Any:
    # Python's json.dumps writes NaN and Infinity; JSON (and docs/contract.md §3) has no such values
    raise ValueError(f"{constant} is not JSON")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
