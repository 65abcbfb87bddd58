"""Our fingerprints against the published test vectors (models/fingerprint_vectors.json),
the file runtimes in other languages test against (docs/contract.md §3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopwatch.models import fingerprints
from loopwatch.models.fingerprints import (
    CALL_DROPPED_KEYS,
    RESULT_DROPPED_KEYS,
    call_fingerprint,
    canonical_json,
    normalise,
    normalise_text,
    result_fingerprint,
    text_fingerprint,
)

VECTORS: dict[str, Any] = json.loads(
    (Path(fingerprints.__file__).parent / "fingerprint_vectors.json").read_text(encoding="utf-8")
)


def test_the_dropped_keys_are_the_ones_published() -> None:
    assert VECTORS["call_dropped_keys"] == sorted(CALL_DROPPED_KEYS)
    assert VECTORS["result_dropped_keys"] == sorted(RESULT_DROPPED_KEYS)
    assert len(VECTORS["calls"]) >= 10 and len(VECTORS["results"]) >= 5


@pytest.mark.parametrize("vector", VECTORS["calls"], ids=lambda v: v["name"])
def test_call_vector(vector: dict[str, Any]) -> None:
    name, arguments = vector["tool_name"], vector["arguments"]
    canonical = canonical_json(
        {"tool_name": normalise(name), "arguments": normalise(arguments, CALL_DROPPED_KEYS)}
    )
    assert canonical.decode("utf-8") == vector["canonical"]
    assert call_fingerprint(name, arguments) == vector["fingerprint"]


@pytest.mark.parametrize("vector", VECTORS["results"], ids=lambda v: v["name"])
def test_result_vector(vector: dict[str, Any]) -> None:
    name, result, error = vector["tool_name"], vector["result"], vector["error"]
    canonical = canonical_json(
        {
            "tool_name": normalise(name),
            "success": error is None,
            "result": normalise(result, RESULT_DROPPED_KEYS),
            "error": None if error is None else normalise_text(error),
            "connection_required": None,
        }
    )
    assert canonical.decode("utf-8") == vector["canonical"]
    assert result_fingerprint(name, result, error) == vector["fingerprint"]


@pytest.mark.parametrize("vector", VECTORS["texts"], ids=lambda v: v["name"])
def test_text_vector(vector: dict[str, Any]) -> None:
    canonical = canonical_json({"text": normalise_text(vector["text"])})
    assert canonical.decode("utf-8") == vector["canonical"]
    assert text_fingerprint(vector["text"]) == vector["fingerprint"]


def test_vectors_pin_the_known_digests() -> None:
    # the vector file cannot drift from the digests pinned since the first release
    by_name = {v["name"]: v["fingerprint"] for v in VECTORS["calls"] + VECTORS["results"]}
    assert by_name["plain call"].endswith("5d408b7c63fc27a79fb640")
    assert by_name["successful result"].endswith("afeb5517c11d46000")
    assert (
        by_name["integers and floats differ: 1 vs 1.0"]
        != by_name["integers and floats differ: 1.0"]
    )
