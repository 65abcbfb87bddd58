"""A policy record read from a file (or `-`, standard input): the one reader behind
`loopwatch policy set` and `scan`/`report --policy`, so that both accept the same records
(docs/contract.md §9.6). A record without `version` reads as version 1 (`policy set`
assigns its own: contract §9.7)."""

from __future__ import annotations

import sys

from loopwatch.models import InvalidPolicy, Policy, parse_policy


def read_policy_text(name: str) -> str:
    """The record's text. Raises InvalidPolicy when it cannot be read or is not UTF-8."""
    try:
        if name == "-":
            return sys.stdin.buffer.read().decode("utf-8")
        with open(name, encoding="utf-8") as source:
            return source.read()
    except OSError as exc:
        raise InvalidPolicy(f"cannot read {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidPolicy(f"{name} is not UTF-8 text") from None


def parse_policy_text(key: str, text: str) -> Policy:
    """The record for `key`, validated (version 1 unless the record has one). Raises
    InvalidPolicy naming the field."""
    return parse_policy(key, text, version=1)


def read_policy(key: str, name: str) -> Policy:
    return parse_policy_text(key, read_policy_text(name))
