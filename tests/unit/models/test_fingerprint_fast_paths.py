"""The fingerprints' fast paths give `json`'s canonical bytes: orjson for float-free
values, the newline scan instead of the line-pass regex (models/fingerprints.py)."""

from __future__ import annotations

import re
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.models import fingerprints
from loopwatch.models.fingerprints import (
    CALL_DROPPED_KEYS,
    RESULT_DROPPED_KEYS,
    call_fingerprint,
    canonical_json,
    digest,
    normalise,
    normalise_text,
    result_fingerprint,
)

# What the line pass used to be decided by (and still defines `_needs_line_pass`).
_LINE_PASS_REGEX = re.compile(r"\r|[^\S\n]\n")

_text = st.text(
    alphabet=st.one_of(
        st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x1c", "\x85", "\xa0", "\u2028"]),
        st.characters(exclude_categories=["Cs"]),
    ),
    max_size=12,
)
_leaf = st.one_of(
    _text,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)
_json = st.recursive(
    _leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(_text, st.sampled_from(sorted(CALL_DROPPED_KEYS))), children),
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(name=_text, value=_json, error=st.one_of(st.none(), _text))
def test_fingerprints_are_those_of_json_canonical_encoding(
    name: str, value: Any, error: str | None
) -> None:
    assert call_fingerprint(name, value) == digest(
        {"tool_name": normalise(name), "arguments": normalise(value, CALL_DROPPED_KEYS)}
    )
    assert result_fingerprint(name, value, error) == digest(
        {
            "tool_name": normalise(name),
            "success": error is None,
            "result": normalise(value, RESULT_DROPPED_KEYS),
            "error": None if error is None else normalise_text(error),
            "connection_required": None,
        }
    )


def test_values_orjson_refuses_or_formats_differently_still_get_json_bytes() -> None:
    for value in (
        {"n": 2**64, "m": -(2**63) - 1},  # beyond 64 bits: orjson refuses
        {"f": [1e16, 1e-7, -0.0, 1.5]},  # floats: formatted differently
        {"k": ("a", "b")},  # a tuple is a list once normalised
        {"\U0001f600": 1, "\uffff": 2, "é": 3},  # key order by code point across planes
        {"c": "".join(map(chr, range(32))) + "\x7f\u2028"},
    ):
        expected = digest({"tool_name": "t", "arguments": normalise(value)})
        assert call_fingerprint("t", value) == expected
    # what orjson does encode, it encodes as json does (a big int goes to json)
    plain = {"b": [True, None, 2**63, -(2**63)], "s": "é\x00\u2028", "k": {"z": 1, "a": []}}
    assert fingerprints._encode_plain(plain) == canonical_json(plain)
    assert fingerprints._encode_plain({"n": 2**64}) == canonical_json({"n": 2**64})


def test_newline_scan_agrees_with_the_line_pass_regex_for_every_code_point() -> None:
    needs = fingerprints._needs_line_pass
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        for text in (char + "\n", "a" + char + "\nb", "\n" + char, char):
            assert needs(text) == (_LINE_PASS_REGEX.search(text) is not None), (hex(code), text)


@given(text=_text)
def test_normalise_text_keeps_its_definition(text: str) -> None:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    assert normalise_text(text) == "\n".join(line.rstrip() for line in lines).strip()
    assert canonical_json(normalise_text(text)) == canonical_json(normalise(text))


def _reference_normalise(value: Any, dropped: frozenset[str]) -> Any:
    """docs/contract.md §3's normalisation spelled out, without any fast path."""
    if isinstance(value, str):
        lines = value.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return "\n".join(line.rstrip() for line in lines).strip()
    if isinstance(value, dict):
        return {k: _reference_normalise(v, dropped) for k, v in value.items() if k not in dropped}
    if isinstance(value, list | tuple):
        return [_reference_normalise(item, dropped) for item in value]
    return value


@settings(max_examples=400, deadline=None)
@given(name=_text, value=_json, error=st.one_of(st.none(), _text))
def test_fingerprints_are_those_of_the_reference_normalisation(
    name: str, value: Any, error: str | None
) -> None:
    # `_normalise` strips strings without line breaks and objects' leaves inline
    assert call_fingerprint(name, value) == digest(
        {
            "tool_name": _reference_normalise(name, frozenset()),
            "arguments": _reference_normalise(value, CALL_DROPPED_KEYS),
        }
    )
    assert result_fingerprint(name, {"r": value, "s": name}, error) == digest(
        {
            "tool_name": _reference_normalise(name, frozenset()),
            "success": error is None,
            "result": _reference_normalise({"r": value, "s": name}, RESULT_DROPPED_KEYS),
            "error": None if error is None else _reference_normalise(error, frozenset()),
            "connection_required": None,
        }
    )
