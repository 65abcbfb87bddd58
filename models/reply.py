"""The reply-partition header (docs/contract.md §5.1): which verdicts partition an
event's verdict goes to.

A runtime that reads only some partitions of the verdicts topic stamps each event with
one of them; the worker sends the event's verdict there instead of by key. No header:
by key, as before the header existed. Pure: the worker and runtimes share it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

REPLY_PARTITION_HEADER = "loopwatch-reply-partition"
"""Kafka header name; its value is the partition number in ASCII decimal ("0", "7")."""

_MAX_DIGITS = 6  # no topic has a million partitions: longer values are not read

ReplyProblem = Literal["malformed", "out_of_range"]


def reply_header(partition: int) -> tuple[str, bytes]:
    """The header an event carries to have its verdict sent to `partition`."""
    if partition < 0:
        raise ValueError(f"a partition is >= 0, got {partition}")
    return (REPLY_PARTITION_HEADER, str(partition).encode("ascii"))


def reply_partition(
    headers: Iterable[tuple[str, bytes | None]] | None, partitions: int
) -> tuple[int | None, ReplyProblem | None]:
    """The verdicts partition an event's headers name, and what was wrong with them.

    (partition, None): route there. (None, None): no header, route by key. (None,
    problem): the first reply header is not a decimal number below `partitions`; route
    by key. Never raises. Only the first header of that name counts.
    """
    if not headers:
        return None, None
    for name, value in headers:
        if name != REPLY_PARTITION_HEADER:
            continue
        if (
            not isinstance(value, bytes)
            or not 0 < len(value) <= _MAX_DIGITS
            or not value.isdigit()  # ASCII digits only for bytes: no sign, no spaces
        ):
            return None, "malformed"
        partition = int(value)
        if partition >= partitions:
            return None, "out_of_range"
        return partition, None
    return None, None
