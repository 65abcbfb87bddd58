"""Per-event shortcuts in the detector give what the plain code gave: the read range of
an int offset, and the remembered default-text warnings."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from loopwatch.models import LoopWarning
from loopwatch.streams.detector import DEFAULT_TEXTS, Hit, Match, WarningTexts, warning_of
from loopwatch.streams.detector.rules import ALL_RULES
from loopwatch.streams.detector.rules.repeated_read_range import read_range
from loopwatch.streams.detector.tools import short_digest


def _range_by_json(offset: Any) -> str:
    # read_range as it was: every number through json.dumps
    key = offset if isinstance(offset, str) else json.dumps(offset)
    return key if len(key) <= 40 else "#" + short_digest(key)


@pytest.mark.parametrize(
    "offset", [0, 1, -1, 7, 2**31, 2**63, -(2**64), 10**39, 10**40, 10**41, 10**400]
)
def test_an_int_offset_gives_the_range_json_gave(offset: int) -> None:
    assert read_range({"offset": offset}) == _range_by_json(offset)


def test_a_bool_or_float_offset_still_goes_through_json() -> None:
    assert read_range({"offset": True}) == "true"
    assert read_range({"offset": 1.0}) == "1.0"
    assert read_range({"offset": 1e16}) == "1e+16"


def _rendered(match: Match, texts: WarningTexts) -> LoopWarning:
    hit = match.hit
    name = match.rule.name
    return LoopWarning(
        rule=name,
        tool_names=hit.tool_names,
        count=hit.count,
        threshold=hit.threshold,
        message=texts.render(name, hit.tool_names, hit.count, hit.threshold),
    )


def test_warnings_are_those_rendered_for_the_match_remembered_or_not() -> None:
    custom = WarningTexts(
        {rule.name: f"{rule.name}: {{tools}} x{{count}}" for rule in ALL_RULES.rules}
    )
    for rule in ALL_RULES.rules:
        for tools in (("bash",), ("a b", "read_file"), ()):
            match = Match(rule, Hit(tools, 4, 3, "subject"))
            for texts in (DEFAULT_TEXTS, custom):
                first, again = warning_of(match, texts), warning_of(match, texts)
                assert first == again == _rendered(match, texts)
                assert first.model_dump_json() == _rendered(match, texts).model_dump_json()
    # a hit whose names are not a tuple is rendered, not remembered
    listed = Match(ALL_RULES.rules[0], Hit(["bash"], 2, 2, "s"))  # type: ignore[arg-type]
    assert warning_of(listed).tool_names == ("bash",)


def test_a_warning_that_cannot_be_remembered_fails_as_it_did_before() -> None:
    rule = ALL_RULES.rules[0]
    unhashable = Match(rule, Hit((["bash"],), 2, 2, "s"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):  # as before: rendering hashes the names too
        warning_of(unhashable)
    with pytest.raises(ValidationError):
        warning_of(Match(rule, Hit(("bash",), 0, 2, "s")))  # a count below 1
