"""Dead letters (docs/contract.md §7): what goes to `agent-events-dlq` and the headers naming why.

The record's original key and value bytes are kept as they are; the headers say which
error class, a short reason (never the record's content) and where the record came from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from loopwatch.streams.kafka.outputs import Outputs

log = logging.getLogger(__name__)

DeadLetterKind = Literal[
    "not_utf8",  # the value is not UTF-8
    "not_json",  # the value is not a JSON document
    "schema",  # JSON that does not fit docs/contract.md §2
    "key_mismatch",  # the record key differs from the event's session_id
    "too_large",  # larger than the configured max_event_bytes
    "empty",  # no value at all (a tombstone on the events topic)
    "internal",  # processing failed on a valid event (detector, encoding): a bug
    "policy",  # an invalid record on the policy topic (docs/contract.md §9.7)
    "not_otlp",  # otel-bridge: not an OTLP trace request in the configured encoding
]
DEAD_LETTER_KINDS: tuple[DeadLetterKind, ...] = get_args(DeadLetterKind)

HEADER_ERROR = "loopwatch.error"
HEADER_REASON = "loopwatch.reason"
HEADER_TOPIC = "loopwatch.source.topic"
HEADER_PARTITION = "loopwatch.source.partition"
HEADER_OFFSET = "loopwatch.source.offset"

_MAX_REASON_CHARS = 300


@dataclass(frozen=True)
class DeadLetter:
    """Why a record was not processed."""

    kind: DeadLetterKind
    reason: str


@dataclass(frozen=True)
class SourcePosition:
    """Where a record was read from."""

    topic: str
    partition: int
    offset: int


def dead_letter_headers(letter: DeadLetter, source: SourcePosition) -> list[tuple[str, bytes]]:
    """Kafka headers of a dead letter: error class, reason and source position."""
    return [
        (HEADER_ERROR, letter.kind.encode()),
        (HEADER_REASON, letter.reason[:_MAX_REASON_CHARS].encode("utf-8", "replace")),
        (HEADER_TOPIC, source.topic.encode()),
        (HEADER_PARTITION, str(source.partition).encode()),
        (HEADER_OFFSET, str(source.offset).encode()),
    ]


async def send_dead_letter(outputs: Outputs, topic: str, message: Any, letter: DeadLetter) -> None:
    """Log a dead letter (kind, source position and reason: never the record's content) and
    send `message`'s original key and value to `topic` with the headers naming why.
    `message`: what was read (a faust Message or an aiokafka ConsumerRecord)."""
    source = SourcePosition(message.topic, message.partition, message.offset)
    log.warning(
        "dead letter %s at %s[%d]@%d: %s",
        letter.kind,
        source.topic,
        source.partition,
        source.offset,
        letter.reason,
    )
    headers = dead_letter_headers(letter, source)
    await outputs.send(topic, message.key, message.value, headers=headers)
