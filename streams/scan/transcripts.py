"""Recorded transcripts as loopwatch events, for `loopwatch scan --format`.

Most people who want to scan have transcripts, not events. A transcript file holds either
one conversation as a JSON array of messages, or one conversation per line: a JSON array
of messages, or an object with the messages under `messages` (OpenAI Chat, Anthropic
Messages) or `input` (Responses API items). The conversion is the runtime tracker's own
(`streams.client.history`), so a scanned transcript gets the verdicts its live run would.

A conversation's session id is its `session_id`, `conversation_id` or `id` field, else
`<file name>:<line number>`; its `agent_id` field is kept. Transcripts carry no times:
events are one millisecond apart from the Unix epoch, so the output is deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePath
from typing import IO, Any, cast

from pydantic import ValidationError

from loopwatch.models import AgentEvent
from loopwatch.streams.client.history import FORMATS, Format, HistoryReader, as_agent_events
from loopwatch.streams.scan import formats

AUTO = "auto"
"""Read each conversation in the format its own marks show (streams.scan.formats)."""

TRANSCRIPT_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SESSION_FIELDS = ("session_id", "conversation_id", "id")
MESSAGES_FIELDS = ("messages", "input")
SHAPES = (
    "a JSON array of messages, or one conversation per line (an array of messages, or an "
    'object with "messages" or "input")'
)


class InvalidConversation(ValueError):
    """A line (or file) that is not a conversation of the given format; says why."""


@dataclass(frozen=True)
class Conversation:
    line: int
    """Line number of the conversation (1 for a whole-file array)."""
    events: list[AgentEvent]


def read_conversations(
    source: IO[bytes], fmt: Format | str, *, name: str
) -> Iterator[Conversation | InvalidConversation]:
    """Each conversation of `source` as events, or the reason a line is not one.

    An invalid line is yielded as an `InvalidConversation` (with its line number in
    `.args[1]`) and the rest is read on: one bad line never hides the others."""
    data = source.read()
    label = PurePath(name).name if name != "-" else "stdin"
    whole = _whole_file_conversation(data)
    if whole is not None:
        yield _conversation(whole, fmt, label, 1)
        return
    for number, line in enumerate(data.splitlines(), start=1):
        if line.strip():
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                yield InvalidConversation("not valid JSON", number)
                continue
            yield _conversation(value, fmt, label, number)


def looks_like_transcript(line: bytes) -> bool:
    """Whether an events-format line that failed to decode is a transcript instead."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return False
    if isinstance(value, list):
        return True
    return isinstance(value, Mapping) and (
        "role" in value or any(field in value for field in MESSAGES_FIELDS)
    )


def _whole_file_conversation(data: bytes) -> list[Any] | None:
    # One pretty-printed array of messages; a JSON-lines file fails to parse as a whole.
    stripped = data.lstrip()
    if not stripped.startswith(b"["):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(item, Mapping) for item in value):
        return value
    return None


def _conversation(
    value: Any, wanted: Format | str, label: str, number: int
) -> Conversation | InvalidConversation:
    record: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
    messages = value if isinstance(value, list) else _messages(record)
    if messages is None or not all(isinstance(m, Mapping) for m in messages):
        return InvalidConversation(
            f"not {formats.article('transcript' if wanted == AUTO else wanted)} conversation: "
            "expected "
            f"{SHAPES}; accepted formats: {', '.join(FORMATS)} (or events)",
            number,
        )
    fmt = _format(wanted, messages, record, number)
    if isinstance(fmt, InvalidConversation):
        return fmt
    session_id = _session_id(record) or f"{label}:{number}"
    agent_id = record.get("agent_id") if isinstance(record.get("agent_id"), str) else None
    try:
        reader = HistoryReader(fmt)
        history = reader.events(messages)
        system = record.get("system")
        if fmt == "anthropic" and system:
            history.insert(0, reader.system_prompt(_system_text(system)))
        events = as_agent_events(
            history, session_id=session_id, started=TRANSCRIPT_EPOCH, agent_id=agent_id
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return InvalidConversation(
            f"not {formats.article(fmt)} conversation: {where}: {error['msg']}", number
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        return InvalidConversation(
            f"not {formats.article(fmt)} conversation: a message lacks an expected field "
            f"({type(exc).__name__}: {exc})",
            number,
        )
    return Conversation(number, events)


def _format(
    wanted: str, messages: Sequence[Any], record: Mapping[str, Any], number: int
) -> Format | InvalidConversation:
    """The format to read the conversation in, or why it is refused."""
    if wanted == AUTO:
        found = formats.detect(messages, record)
        if found in FORMATS:
            return found
        return InvalidConversation(f"cannot tell the format: {found}; pass --format", number)
    fmt = cast(Format, wanted)
    refused = formats.mismatch(fmt, messages, record)
    return fmt if refused is None else InvalidConversation(refused, number)


def _messages(record: Mapping[str, Any]) -> Sequence[Any] | None:
    for field in MESSAGES_FIELDS:
        messages = record.get(field)
        if isinstance(messages, list):
            return messages
    return None


def _session_id(record: Mapping[str, Any]) -> str | None:
    for field in SESSION_FIELDS:
        value = record.get(field)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(block.get("text", "") for block in system if isinstance(block, Mapping))
    return ""
