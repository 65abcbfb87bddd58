"""Fingerprints of tool calls and results (docs/contract.md §3).

The algorithm is fixed so that a runtime that fingerprints locally and the stream app
that fingerprints raw fields produce byte-identical digests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import orjson

CALL_DROPPED_KEYS = frozenset({"human_intent", "output"})
RESULT_DROPPED_KEYS = frozenset(
    {"created_at", "duration_ms", "elapsed_ms", "request_id", "time_ms", "timestamp", "updated_at"}
)
FINGERPRINT_PREFIX = "sha256:"
FINGERPRINT_PATTERN = r"^sha256:[0-9a-f]{64}$"


def _needs_line_pass(text: str) -> bool:
    """A carriage return, or whitespace (str.isspace's set, the one rstrip uses) at the
    end of an inner line: only then does a string need the line-by-line pass. Finding
    each newline and testing the character before it is several times faster than a
    regex over the whole string (most strings have no newline, or a few)."""
    if "\r" in text:
        return True
    at = text.find("\n", 1)  # a newline at 0 ends no line with whitespace
    while at != -1:
        before = text[at - 1]
        if before != "\n" and before.isspace():
            return True
        at = text.find("\n", at + 1)
    return False


def normalise_text(text: str) -> str:
    """Unify line endings, strip trailing whitespace from each line, then trim."""
    if not _needs_line_pass(text):
        return text.strip()
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def normalise(value: Any, dropped_keys: Iterable[str] = ()) -> Any:
    """Normalise a JSON value: `dropped_keys` removed at every depth, strings normalised,
    numbers/booleans/null untouched (`1` and `1.0` differ). Keys are sorted when the
    value is encoded (`canonical_json`)."""
    dropped = frozenset(dropped_keys)
    return _normalise(value, dropped, [])


def _normalise(value: Any, dropped: frozenset[str], other: list[Any]) -> Any:
    """`normalise`; appends to `other` each leaf that is not exactly a str, int, bool or
    None (floats above all), so the caller knows whether `_encode_plain` may encode it."""
    kind = type(value)
    # The exact types a JSON parser makes first (the common case), then any subclass.
    if kind is str:
        # No line break: `normalise_text` would only strip (two calls saved per string).
        if "\n" not in value and "\r" not in value:
            return value.strip()
        return normalise_text(value)
    if kind is dict:
        # Key order is left to the encoder, which sorts at every depth anyway. Leaves
        # are done here, without a call each (most values are shallow objects).
        normalised = {}
        for key, item in value.items():
            if key in dropped:
                continue
            leaf = type(item)
            if leaf is str:
                normalised[key] = (
                    item.strip() if "\n" not in item and "\r" not in item else normalise_text(item)
                )
            elif leaf is int or leaf is bool or item is None:
                normalised[key] = item
            else:
                normalised[key] = _normalise(item, dropped, other)
        return normalised
    if kind is list:
        return [_normalise(item, dropped, other) for item in value]
    if kind is int or kind is bool or value is None:
        return value
    other.append(value)
    if isinstance(value, str):
        return normalise_text(value)
    if isinstance(value, dict):
        return {
            key: _normalise(item, dropped, other)
            for key, item in value.items()
            if key not in dropped
        }
    if isinstance(value, list | tuple):
        return [_normalise(item, dropped, other) for item in value]
    return value


_CANONICAL = json.JSONEncoder(
    separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """Compact JSON with keys sorted by code point and non-ASCII kept as UTF-8."""
    return _CANONICAL.encode(value).encode("utf-8")


def _encode_plain(value: Any) -> bytes:
    """`canonical_json` of a value made of dicts, lists, str, int, bool and None only
    (exact types): orjson writes those byte for byte as `json` does here (compact, keys
    sorted by code point, UTF-8), several times faster; it refuses what it encodes
    differently or not at all (integers beyond 64 bits, lone surrogates, non-str keys),
    and those go to `json`, which gives its own result or error. Floats never get here:
    the two format them differently (`1e+16` against `1e16`)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError
        return canonical_json(value)


def digest(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of an already-normalised value."""
    return FINGERPRINT_PREFIX + hashlib.sha256(canonical_json(value)).hexdigest()


def _digest_of(document: dict[str, Any], other: list[Any]) -> str:
    encoded = canonical_json(document) if other else _encode_plain(document)
    return FINGERPRINT_PREFIX + hashlib.sha256(encoded).hexdigest()


def call_fingerprint(tool_name: str, arguments: Any) -> str:
    """Fingerprint of a tool call; `human_intent` and `output` arguments do not count."""
    other: list[Any] = []
    document = {
        "tool_name": _normalise(tool_name, _NOTHING_DROPPED, other),
        "arguments": _normalise(arguments, CALL_DROPPED_KEYS, other),
    }
    return _digest_of(document, other)


def result_fingerprint(tool_name: str, result: Any, error: str | None) -> str:
    """Fingerprint of a tool result; volatile keys (timings, ids, timestamps) do not count."""
    other: list[Any] = []
    document = {
        "tool_name": _normalise(tool_name, _NOTHING_DROPPED, other),
        "success": error is None,
        "result": _normalise(result, RESULT_DROPPED_KEYS, other),
        "error": None if error is None else normalise_text(error),
        "connection_required": None,
    }
    return _digest_of(document, other)


def text_fingerprint(text: str) -> str:
    """Fingerprint of an assistant message's text (contract §2, §9.14): of
    `{"text": text}`, the text normalised like any string, so a runtime can send the
    digest instead of the text."""
    return _digest_of({"text": normalise_text(text)}, [])


_NOTHING_DROPPED: frozenset[str] = frozenset()
