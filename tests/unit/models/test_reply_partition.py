"""The reply-partition header (docs/contract.md §5.1): what the worker reads from it."""

from __future__ import annotations

import pytest

from loopwatch.models import REPLY_PARTITION_HEADER, reply_header, reply_partition

H = REPLY_PARTITION_HEADER


def test_a_stamped_partition_is_routed_there() -> None:
    assert reply_partition([reply_header(3)], 4) == (3, None)
    assert reply_partition([reply_header(0)], 1) == (0, None)
    assert reply_header(12) == (H, b"12")


@pytest.mark.parametrize("headers", [None, [], [("other", b"1")], (("trace", b"x"),)])
def test_no_header_routes_by_key_and_is_no_problem(headers: object) -> None:
    assert reply_partition(headers, 4) == (None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value", [b"", b"-1", b"+1", b" 1", b"1 ", b"x", b"1.0", b"\xd9\xa3", b"1234567", None]
)
def test_a_malformed_value_routes_by_key(value: bytes | None) -> None:
    assert reply_partition([(H, value)], 4) == (None, "malformed")


@pytest.mark.parametrize("value", [b"4", b"99", b"999999"])
def test_a_partition_the_topic_does_not_have_routes_by_key(value: bytes) -> None:
    assert reply_partition([(H, value)], 4) == (None, "out_of_range")


def test_only_the_first_reply_header_counts() -> None:
    assert reply_partition([("a", b"9"), (H, b"1"), (H, b"2")], 4) == (1, None)
    assert reply_partition([(H, b"x"), (H, b"2")], 4) == (None, "malformed")


def test_a_negative_partition_cannot_be_stamped() -> None:
    with pytest.raises(ValueError):
        reply_header(-1)
