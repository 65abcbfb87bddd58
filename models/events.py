"""Agent events (docs/contract.md §2): one JSON object per record on `agent-events`."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Any, Literal

import pydantic_core
from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

from loopwatch.models.fingerprints import FINGERPRINT_PATTERN

SCHEMA_VERSION = 1

Fingerprint = Annotated[str, Field(pattern=FINGERPRINT_PATTERN)]


def _rfc3339_string(value: Any) -> Any:
    # pydantic would also take epoch numbers; the contract says an RFC 3339 string.
    if not isinstance(value, str | datetime):
        raise ValueError("must be an RFC 3339 timestamp string with an offset")
    return value


Timestamp = Annotated[AwareDatetime, BeforeValidator(_rfc3339_string)]


class _Event(BaseModel):
    """Fields common to every event."""

    # Unknown extra fields are ignored (docs/contract.md §2); models are immutable values.
    model_config = ConfigDict(frozen=True, extra="ignore")

    v: Literal[1] = 1
    """Schema version; missing means 1, any other value is rejected."""
    session_id: Annotated[StrictStr, Field(min_length=1, max_length=256)]
    """The conversation this event belongs to; also the Kafka record key."""
    seq: Annotated[StrictInt, Field(ge=0)]
    """Position in the session; strictly increasing, gaps allowed."""
    ts: Timestamp
    """When the message was produced (RFC 3339 with an offset)."""
    agent_id: StrictStr | None = None
    """Which agent or deployment; used for per-agent config and metrics."""


class UserMessage(_Event):
    """A message from the user: a boundary for the rules."""

    type: Literal["user_message"]
    """Discriminator."""
    text: StrictStr | None = None
    """The message text; not needed for detection."""


class SystemMessage(_Event):
    """A system message: a boundary for the rules."""

    type: Literal["system_message"]
    """Discriminator."""
    text: StrictStr | None = None
    """The message text; not needed for detection."""


class ToolCall(BaseModel):
    """One tool call inside an assistant message."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: StrictStr
    """The call id that the matching tool result names in `call_id`."""
    name: StrictStr
    """The tool's name."""
    arguments: Any = Field(default_factory=dict)
    """The call's arguments: any JSON value."""
    fingerprint: Fingerprint | None = None
    """Call fingerprint precomputed by the runtime; used in preference to `arguments`."""


class AssistantMessage(_Event):
    """A model turn: a tool step when it has tool calls, a text step when it has none."""

    type: Literal["assistant_message"]
    """Discriminator."""
    text: StrictStr | None = None
    """The message text; not needed for detection."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls of this step, in order (possibly none)."""
    text_fingerprint: Fingerprint | None = None
    """Fingerprint of `text`, precomputed by the runtime (contract 1.3, §9.14); used in
    preference to `text`, so the text itself need not be sent."""


class ToolResult(_Event):
    """The outcome of one tool call."""

    type: Literal["tool_result"]
    """Discriminator."""
    call_id: StrictStr
    """The id of the call this result answers."""
    tool_name: StrictStr
    """The tool's name."""
    result: Any = None
    """The tool's output: any JSON value."""
    error: StrictStr | None = None
    """Error text; the result is failed exactly when this is a string."""
    call_fingerprint: Fingerprint | None = None
    """Fingerprint of the call, precomputed by the runtime."""
    result_fingerprint: Fingerprint | None = None
    """Fingerprint of this result, precomputed by the runtime."""


class SessionEnd(_Event):
    """The session is over: its state is dropped."""

    type: Literal["session_end"]
    """Discriminator."""


class ContextCondensed(_Event):
    """The platform condensed (summarised, trimmed) the conversation history to fit the
    context window (contract 1.3, §9.15). Not a boundary, not a step."""

    type: Literal["context_condensed"]
    """Discriminator."""


AgentEvent = Annotated[
    UserMessage | SystemMessage | AssistantMessage | ToolResult | SessionEnd | ContextCondensed,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
# The adapter's validator itself: TypeAdapter.validate_python only checks its keyword
# arguments in Python and passes them on; decode_event runs for every record.
_validate_event = EVENT_ADAPTER.validator.validate_python

__all__ = [
    "EVENT_ADAPTER",
    "SCHEMA_VERSION",
    "AgentEvent",
    "AssistantMessage",
    "ContextCondensed",
    "InvalidEvent",
    "SessionEnd",
    "SystemMessage",
    "ToolCall",
    "ToolResult",
    "UserMessage",
    "decode_event",
]


class InvalidEvent(ValueError):
    """A record that is not a valid event; `kind` names the error class for dead letters."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"{kind}: {reason}")
        self.kind = kind
        """`not_utf8`, `not_json` or `schema`."""
        self.reason = reason
        """A short reason; never the record's content beyond field names."""


TOO_DEEP = InvalidEvent(
    "schema", "arguments or result nested too deeply to fingerprint (RecursionError)"
)
"""What an event whose value parses but is too deep to normalise is: bad input (a valid
JSON parser takes up to ~990 levels; normalising takes fewer), never a processing bug."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# One decoder for all records; it rejects NaN/Infinity (not JSON; they would break
# fingerprints).
_JSON = json.JSONDecoder(parse_constant=_reject_constant)


def decode_event(data: bytes | str) -> AgentEvent:
    """Decode one JSON event (UTF-8 bytes or str); raises `InvalidEvent` when it does not
    fit docs/contract.md §2."""
    try:
        # pydantic-core's parser: about twice `json`'s speed on these records. It refuses
        # NaN/Infinity here, and lone surrogate escapes, which `json` takes; whatever it
        # refuses goes through `json`, so the outcome and its error are `json`'s.
        raw = pydantic_core.from_json(data, allow_inf_nan=False, cache_strings="keys")
    except (ValueError, TypeError):  # TypeError: a str holding a lone surrogate
        raw = _parse_with_json(data)
    try:
        event: AgentEvent = _validate_event(raw)
        return event
    except ValidationError as exc:
        raise InvalidEvent("schema", _schema_reason(exc)) from None


def _parse_with_json(data: bytes | str) -> Any:
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    except UnicodeDecodeError as exc:
        raise InvalidEvent("not_utf8", f"invalid UTF-8 at byte {exc.start}") from None
    try:
        raw = _JSON.decode(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidEvent("not_json", _first_line(exc)) from None
    # Valid UTF-8 holds no surrogates, so only a `\uD8xx` escape (or a str given
    # directly) can bring a lone one in; it would fail later, wherever the text is encoded.
    if _SURROGATE_ESCAPE.search(text) or (text is data and not _encodable(text)):
        field = _lone_surrogate_field(raw)
        if field is not None:
            raise InvalidEvent("schema", f"{field}: string is not valid Unicode (lone surrogate)")
    return raw


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# `arguments` and `result` are any JSON value: their keys are tool content, not field names.
_OPAQUE_FIELDS = frozenset({"arguments", "result"})


def _lone_surrogate_field(value: Any) -> str | None:
    """The field path of a string (or key) that cannot be encoded as UTF-8, if any."""
    # (item, its path, inside arguments/result): iterative, so deep nesting cannot
    # exhaust the recursion limit.
    stack: list[tuple[Any, str, bool]] = [(value, "", False)]
    while stack:
        item, where, opaque = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return where or "(record)"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not _encodable(key):
                    return f"{where or '(record)'} (a key)"
                if opaque:
                    stack.append((child, where, True))
                else:
                    stack.append((child, _join(where, key), key in _OPAQUE_FIELDS))
        elif isinstance(item, list):
            for index, child in enumerate(item):
                stack.append((child, where if opaque else _join(where, str(index)), opaque))
    return None


def _join(where: str, part: str) -> str:
    return f"{where}.{part}" if where else part


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def _schema_reason(exc: ValidationError) -> str:
    # Field locations and messages only: input values may hold untrusted content.
    parts = []
    for error in exc.errors(include_input=False, include_url=False)[:3]:
        loc = ".".join(str(p) for p in error["loc"]) or "(record)"
        parts.append(f"{loc}: {error['msg']}")
    return "; ".join(parts)[:300]
