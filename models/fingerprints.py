"""Fingerprints of tool calls and results (docs/contract.md §3).

The algorithm is fixed so that a runtime that fingerprints locally and the stream app
that fingerprints raw fields produce byte-identical digests.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

CALL_DROPPED_KEYS = frozenset({"human_intent", "output"})
RESULT_DROPPED_KEYS = frozenset(
    {"created_at", "duration_ms", "elapsed_ms", "request_id", "time_ms", "timestamp", "updated_at"}
)
FINGERPRINT_PREFIX = "sha256:"
FINGERPRINT_PATTERN = r"^sha256:[0-9a-f]{64}$"


# A carriage return, or whitespace at the end of an inner line: only then does a string
# need the line-by-line pass (`\s` is str.isspace's set, the one rstrip uses).
_NEEDS_LINE_PASS = re.compile(r"\r|[^\S\n]\n")


def normalise_text(text: str) -> str:
    """Unify line endings, strip trailing whitespace from each line, then trim."""
    if _NEEDS_LINE_PASS.search(text) is None:
        return text.strip()
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def normalise(value: Any, dropped_keys: Iterable[str] = ()) -> Any:
    """Normalise a JSON value: `dropped_keys` removed at every depth, strings normalised,
    numbers/booleans/null untouched (`1` and `1.0` differ). Keys are sorted when the
    value is encoded (`canonical_json`)."""
    dropped = frozenset(dropped_keys)
    return _normalise(value, dropped)


def _normalise(value: Any, dropped: frozenset[str]) -> Any:
    if isinstance(value, str):
        return normalise_text(value)
    if isinstance(value, dict):
        # Key order is left to the encoder, which sorts at every depth anyway.
        return {key: _normalise(item, dropped) for key, item in value.items() if key not in dropped}
    if isinstance(value, list | tuple):
        return [_normalise(item, dropped) for item in value]
    return value


_CANONICAL = json.JSONEncoder(
    separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """Compact JSON with keys sorted by code point and non-ASCII kept as UTF-8."""
    return _CANONICAL.encode(value).encode("utf-8")


def digest(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of an already-normalised value."""
    return FINGERPRINT_PREFIX + hashlib.sha256(canonical_json(value)).hexdigest()


def call_fingerprint(tool_name: str, arguments: Any) -> str:
    """Fingerprint of a tool call; `human_intent` and `output` arguments do not count."""
    return digest(
        {
            "tool_name": normalise(tool_name),
            "arguments": normalise(arguments, CALL_DROPPED_KEYS),
        }
    )


def result_fingerprint(tool_name: str, result: Any, error: str | None) -> str:
    """Fingerprint of a tool result; volatile keys (timings, ids, timestamps) do not count."""
    return digest(
        {
            "tool_name": normalise(tool_name),
            "success": error is None,
            "result": normalise(result, RESULT_DROPPED_KEYS),
            "error": None if error is None else normalise_text(error),
            "connection_required": None,
        }
    )
