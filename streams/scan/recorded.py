"""Recorded sessions read into events: event JSON lines or transcripts
(`streams.scan.transcripts`), plain or gzip-compressed (`.gz`). For `loopwatch replay`,
which publishes them, and `loopwatch.scan`, which judges them in process."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from io import BytesIO
from typing import IO, Any, cast

from pydantic import BaseModel

from loopwatch.models import AgentEvent, InvalidEvent, decode_event
from loopwatch.streams.client.history import FORMATS
from loopwatch.streams.scan.transcripts import InvalidConversation, read_conversations

EVENTS_FORMAT = "events"
INPUT_FORMATS = (EVENTS_FORMAT, *FORMATS)


@dataclass
class Skipped:
    """An input line that is no event (or conversation), and why."""

    name: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.name}: line {self.line}: skipped, {self.reason}"


@dataclass
class Recorded:
    """The events of some recorded input, in input order, and the lines skipped."""

    events: list[AgentEvent] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def open_input(path: str) -> IO[bytes]:
    """A file for reading bytes, decompressed when its name ends in `.gz`."""
    if path.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")  # (the caller closes it)


def read_events(source: IO[bytes], fmt: str, *, name: str) -> Iterator[AgentEvent | Skipped]:
    """The events of one input, in order, with a `Skipped` for each line that is none."""
    if fmt == EVENTS_FORMAT:
        for number, line in enumerate(source, start=1):
            if not line.strip():
                continue
            try:
                yield decode_event(line)
            except InvalidEvent as exc:
                yield Skipped(name, number, str(exc))
        return
    for conversation in read_conversations(source, fmt, name=name):  # type: ignore[arg-type]
        if isinstance(conversation, InvalidConversation):
            reason, number = conversation.args
            yield Skipped(name, number, reason)
        else:
            yield from conversation.events


def read_recorded(paths: Iterable[str], fmt: str) -> Recorded:
    """Every event of `paths` (read one after the other). Raises OSError for a file that
    cannot be read (gzip's BadGzipFile is one)."""
    recorded = Recorded()
    for path in paths:
        with open_input(path) as source:
            for item in read_events(source, fmt, name=path):
                if isinstance(item, Skipped):
                    recorded.skipped.append(item)
                else:
                    recorded.events.append(item)
    return recorded


def as_events(items: Iterable[Any], fmt: str, *, name: str = "input") -> Recorded:
    """In-memory input as events: `AgentEvent`s, event dicts or JSON (str/bytes) with
    `fmt` "events"; with a transcript format, one conversation (a list of messages) or
    several (a list of such lists, or of objects with "messages"/"input")."""
    recorded = Recorded()
    if fmt == EVENTS_FORMAT:
        for number, item in enumerate(items, start=1):
            if isinstance(item, BaseModel):  # an event already (AgentEvent is a union)
                recorded.events.append(item)  # type: ignore[arg-type]
                continue
            raw = item if isinstance(item, bytes | str) else json.dumps(item)
            try:
                recorded.events.append(decode_event(raw.encode() if isinstance(raw, str) else raw))
            except InvalidEvent as exc:
                recorded.skipped.append(Skipped(name, number, str(exc)))
        return recorded
    listed = list(items)
    if listed and all(isinstance(m, dict) and ("role" in m or "type" in m) for m in listed):
        conversations: list[Any] = [listed]  # one conversation, its messages
    else:
        conversations = listed
    data = b"\n".join(json.dumps(c).encode() for c in conversations)
    for item in read_events(BytesIO(data), fmt, name=name):
        if isinstance(item, Skipped):
            recorded.skipped.append(item)
        else:
            recorded.events.append(item)
    return recorded
