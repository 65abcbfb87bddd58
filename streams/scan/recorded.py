"""Recorded sessions read into events: event JSON lines or transcripts
(`streams.scan.transcripts`), plain or gzip-compressed (`.gz`). For `loopwatch replay`,
which publishes them, and `loopwatch.scan`, which judges them in process."""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from pydantic import BaseModel

from loopwatch.models import AgentEvent, InvalidEvent, decode_event
from loopwatch.streams.client.history import FORMATS
from loopwatch.streams.scan.inputs import EVENTS_FORMAT, open_input
from loopwatch.streams.scan.inputs import Skipped as InputSkipped
from loopwatch.streams.scan.inputs import read_events as read_input_events

__all__ = ["EVENTS_FORMAT", "INPUT_FORMATS", "Recorded", "Skipped", "as_events", "read_recorded"]

INPUT_FORMATS = (EVENTS_FORMAT, *FORMATS)
"""The formats of in-memory input (`loopwatch.scan`); files also take `auto`."""


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


def read_recorded(paths: Iterable[str], fmt: str) -> Recorded:
    """Every event of `paths` (read one after the other) as `loopwatch scan` reads them:
    `fmt` as its `--format` takes it (`auto` included), gzip told by its first bytes, `-`
    standard input. Raises OSError or EOFError for a file that cannot be read."""
    recorded = Recorded()
    for path in paths:
        with ExitStack() as stack:
            source = open_input(path, stack)
            for item in read_input_events(source, fmt, name=path):
                if isinstance(item, InputSkipped):
                    recorded.skipped.append(Skipped(path, item.line, item.reason))
                else:
                    recorded.events.extend(item[1])
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
    for item in read_input_events(BytesIO(data), fmt, name=name):
        if isinstance(item, InputSkipped):
            recorded.skipped.append(Skipped(name, item.line, item.reason))
        else:
            recorded.events.extend(item[1])
    return recorded
