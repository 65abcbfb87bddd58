"""The input files of `scan` and `report`: a file or standard input, plain or gzip, of
events (JSON lines, docs/contract.md §2) or of transcripts (streams.scan.transcripts).

`--format auto` tells events from transcripts by the first line that is not blank: an
event is a JSON object without the fields of a message or conversation; a JSON array, or
an object with `role`, `messages` or `input`, starts a transcript, whose conversations are
then read each in the format its own marks show (streams.scan.formats).
"""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import chain
from typing import IO, Any, cast

from loopwatch.models import AgentEvent, InvalidEvent, decode_event
from loopwatch.streams.client.history import FORMATS
from loopwatch.streams.scan.transcripts import (
    AUTO,
    InvalidConversation,
    looks_like_transcript,
    read_conversations,
)

EVENTS_FORMAT = "events"
FORMAT_CHOICES = (AUTO, EVENTS_FORMAT, *FORMATS)
GZIP_MAGIC = b"\x1f\x8b"
INPUT_ERRORS = (OSError, EOFError)
"""What reading an input may raise: I/O errors, and a gzip stream cut short."""


def open_input(name: str, stack: ExitStack) -> IO[bytes]:
    """The bytes of `name` (`-`: standard input), uncompressed when gzip (by its magic
    number, whatever the name). Raises OSError."""
    raw: IO[bytes] = sys.stdin.buffer if name == "-" else open(name, "rb")  # noqa: SIM115
    stack.enter_context(raw)
    peek = getattr(raw, "peek", None)
    head = peek(2)[:2] if peek is not None else b""
    if head == GZIP_MAGIC:
        packed = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))
        return cast(IO[bytes], packed)
    return raw


@dataclass(frozen=True)
class Sniffed:
    """An input after `auto` looked at its first line: its kind and all of its lines."""

    transcript: bool
    lines: Iterable[bytes]


def sniff(source: IO[bytes]) -> Sniffed:
    """Whether `source` holds transcripts (else events), reading up to its first line
    that is not blank; `lines` still yields every line."""
    head: list[bytes] = []
    for line in source:
        head.append(line)
        stripped = line.strip()
        if stripped:
            transcript = stripped.startswith(b"[") or looks_like_transcript(stripped)
            return Sniffed(transcript, chain(head, source))
    return Sniffed(False, head)


def transcript_source(lines: Iterable[bytes]) -> IO[bytes]:
    return io.BytesIO(b"".join(lines))


@dataclass(frozen=True)
class Skipped:
    """An input line that gave no event, and why."""

    line: int
    reason: str


def read_events(
    source: IO[bytes], fmt: str, *, name: str
) -> Iterator[tuple[int, list[AgentEvent]] | Skipped]:
    """The events of `source` in `fmt` (or `auto`), each line's (or conversation's) with
    its line number, or why a line was skipped. Raises OSError/EOFError mid-input."""
    transcript = fmt in FORMATS
    lines: Iterable[bytes] = source
    if fmt == AUTO:
        sniffed = sniff(source)
        transcript, lines = sniffed.transcript, sniffed.lines
    if transcript:
        wanted: Any = fmt
        for conversation in read_conversations(transcript_source(lines), wanted, name=name):
            if isinstance(conversation, InvalidConversation):
                reason, number = conversation.args
                yield Skipped(number, reason)
            else:
                yield conversation.line, conversation.events
        return
    for number, line in enumerate(lines, start=1):
        try:
            yield number, [decode_event(line)]
        except InvalidEvent as exc:
            if line.strip():
                yield Skipped(number, f"{exc}{transcript_hint(line)}")


def transcript_hint(line: bytes) -> str:
    """For an events line that is a transcript instead: the option that reads it."""
    if looks_like_transcript(line):
        return f"; a transcript? try --format auto (or {'|'.join(FORMATS)})"
    return ""
