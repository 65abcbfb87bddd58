"""`LoopVerdict.to_json`'s fast path (no warning, no policy) gives the serializer's bytes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.models import LoopVerdict, LoopWarning, PolicyRef


def serializer_bytes(verdict: LoopVerdict) -> bytes:
    return LoopVerdict.__pydantic_serializer__.to_json(verdict)


_offsets = st.builds(
    timezone,
    st.integers(min_value=-(24 * 3600 - 1), max_value=24 * 3600 - 1).map(
        lambda seconds: timedelta(seconds=seconds)
    ),
)
_times = st.datetimes(timezones=st.one_of(st.just(UTC), _offsets))
_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(['"', "\\", "/", "\x00", "\x1f", "\x7f", "\u2028", "\U0001f600"]),
        st.characters(exclude_categories=["Cs"]),
    ),
    min_size=1,
)


@settings(max_examples=400, deadline=None)
@given(
    session_id=_text,
    seq=st.one_of(st.integers(min_value=0, max_value=2**70), st.booleans()),
    agent_id=st.one_of(st.none(), _text),
    event_ts=_times,
    later=st.one_of(st.none(), _times),
)
def test_a_verdict_without_warning_has_the_serializers_bytes(
    session_id: str, seq: int, agent_id: str | None, event_ts: datetime, later: datetime | None
) -> None:
    verdict = LoopVerdict(
        session_id=session_id,
        seq=seq,
        agent_id=agent_id,
        event_ts=event_ts,
        evaluated_at=event_ts if later is None else later,  # the same object, or another
        warning=None,
    )
    assert verdict.to_json() == serializer_bytes(verdict)


def test_a_verdict_with_a_warning_or_a_policy_has_the_serializers_bytes() -> None:
    now = datetime(2026, 12, 4, 9, 30, 0, 250000, tzinfo=UTC)
    warning = LoopWarning(
        rule="repeated_result", tool_names=("read",), count=3, threshold=3, message="Stop."
    )
    policy = PolicyRef(key="*", version=2)
    for verdict in (
        LoopVerdict(
            session_id="s", seq=1, agent_id="a", event_ts=now, evaluated_at=now, warning=warning
        ),
        LoopVerdict(
            session_id="s",
            seq=1,
            agent_id=None,
            event_ts=now,
            evaluated_at=now,
            warning=None,
            policy=policy,
        ),
    ):
        assert verdict.to_json() == serializer_bytes(verdict)


def test_the_fast_path_gives_specs_bytes() -> None:
    ts = datetime(2026, 12, 2, 9, 0, 1, tzinfo=timezone(timedelta(hours=2)))
    verdict = LoopVerdict(
        session_id="s-1", seq=7, agent_id=None, event_ts=ts, evaluated_at=ts, warning=None
    )
    assert verdict.to_json() == (
        b'{"v":1,"type":"loop_verdict","session_id":"s-1","seq":7,"agent_id":null,'
        b'"event_ts":"2026-12-02T09:00:01+02:00","evaluated_at":"2026-12-02T09:00:01+02:00",'
        b'"warning":null}'
    )
