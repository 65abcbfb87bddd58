"""Test files are collected in rootdir mode (no __init__.py under tests/), so two files with
one basename collide: pytest stops the whole run at collection. Caught here, in any subset."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_files_share_a_basename() -> None:
    places: defaultdict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        places[path.name].append(str(path.relative_to(TESTS)))
    assert {name: where for name, where in places.items() if len(where) > 1} == {}
