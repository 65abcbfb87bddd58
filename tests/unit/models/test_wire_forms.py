"""The verdict's and episode's wire forms are model_dump_json()'s bytes, and the
detector's validator-built models equal the ones their constructors build."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from loopwatch.models import LoopEpisode, LoopVerdict, LoopWarning, PolicyRef
from loopwatch.streams import detector
from loopwatch.streams.detector import core, episodes

_WARNING = LoopWarning(
    rule="repeated_result", tool_names=("a", "b"), count=3, threshold=3, message="stop `a`"
)
_AT = datetime(2026, 12, 3, 10, 0, 0, 123456, tzinfo=UTC)
_OFFSET = datetime(2026, 12, 3, 10, 0, tzinfo=timezone(timedelta(hours=-5, minutes=-30)))


@pytest.mark.parametrize(
    "fields",
    [
        {"warning": None, "policy": None, "agent_id": None},
        {"warning": _WARNING, "policy": PolicyRef(key="*", version=2), "agent_id": "ä-\u2028"},
        {"warning": _WARNING, "policy": None, "agent_id": "a", "event_ts": _OFFSET},
    ],
)
def test_verdict_wire_form_and_validator(fields: dict[str, object]) -> None:
    values = {"session_id": "s\u00e9\U0001f600", "seq": 2**70, "event_ts": _AT}
    values |= {"evaluated_at": _AT + timedelta(microseconds=1), **fields}
    built = LoopVerdict(**values)  # type: ignore[arg-type]
    validated = core._validate_verdict(values)
    assert validated == built and validated.model_fields_set == built.model_fields_set
    assert built.to_json() == built.model_dump_json().encode("utf-8")
    assert ('"policy"' in built.to_json().decode()) == (fields["policy"] is not None)


def test_warning_and_episode_through_their_validators() -> None:
    hit = detector.Hit(("a", "b"), 3, 3, "subject")
    match = detector.Match(detector.ALL_RULES.rules[1], hit)
    warning = detector.warning_of(match)
    assert warning == LoopWarning(
        rule=match.rule.name,
        tool_names=("a", "b"),
        count=3,
        threshold=3,
        message=detector.DEFAULT_TEXTS.render(match.rule.name, ("a", "b"), 3, 3),
    )
    open_episode = episodes.OpenEpisode(
        "repeated_result", "0123456789abcdef", ("a",), "agent", 4, _AT, 6, _AT, 3, 2
    )
    closed = open_episode.close("s", "broken", 9, _AT + timedelta(seconds=5), None)
    assert closed == LoopEpisode(
        session_id="s",
        agent_id="agent",
        rule="repeated_result",
        subject="0123456789abcdef",
        tool_names=("a",),
        first_seq=4,
        last_seq=9,
        started_at=_AT,
        ended_at=_AT + timedelta(seconds=5),
        peak_count=3,
        warnings=2,
        outcome="broken",
        duration_seconds=5.0,
        warned_calls=0,  # issue 31: model calls that saw its warning (none here)
    )
    assert closed.to_json() == closed.model_dump_json().encode("utf-8")
    with pytest.raises(ValueError):  # still validated: a count below 1 is refused
        detector.warning_of(detector.Match(match.rule, detector.Hit(("a",), 0, 3, "s")))
