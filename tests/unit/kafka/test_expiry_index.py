"""`ExpiryIndex`: the epoch-seconds entry points (`touch_at`, `due_at`) the pipeline uses
decide exactly as `touch` / `due` do with the event's datetime, whatever its zone, and
`epoch_seconds` is `datetime.timestamp()` to the last bit."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.models import decode_event
from loopwatch.streams.kafka import expiry
from loopwatch.streams.kafka.expiry import ExpiryIndex, epoch_seconds

ZONES = (
    UTC,
    timezone(timedelta(hours=5, minutes=30)),
    timezone(timedelta(hours=-8)),
    timezone(timedelta(hours=14)),
    timezone(timedelta(hours=-23, minutes=-59)),
)


def _decoded_ts(text: str) -> datetime:
    event = decode_event(
        f'{{"session_id":"s","seq":1,"ts":"{text}","type":"user_message"}}'.encode()
    )
    return event.ts


def test_decoded_times_give_the_same_epoch_seconds_as_the_standard_library() -> None:
    # decode accepts aware times only (AwareDatetime); pydantic's tzinfo must convert
    # exactly like the standard library's fixed offsets
    for text, expected in (
        ("2026-12-02T09:00:00Z", datetime(2026, 12, 2, 9, tzinfo=UTC)),
        ("2026-12-02T14:30:00.000001+05:30", datetime(2026, 12, 2, 9, 0, 0, 1, tzinfo=UTC)),
        ("2026-12-02T01:00:00.5-08:00", datetime(2026, 12, 2, 9, 0, 0, 500000, tzinfo=UTC)),
        ("1970-01-01T00:00:00Z", datetime(1970, 1, 1, tzinfo=UTC)),
        ("1969-12-31T23:59:59.999999Z", datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ):
        assert _decoded_ts(text).timestamp() == expected.timestamp()
        assert epoch_seconds(_decoded_ts(text)) == expected.timestamp()


_OFFSETS = st.integers(min_value=-(24 * 3600 - 1), max_value=24 * 3600 - 1)


@settings(max_examples=500, deadline=None)
@given(
    when=st.datetimes(  # naive bounds (hypothesis); the zones are added below
        min_value=datetime(1, 1, 3),  # noqa: DTZ001
        max_value=datetime(9999, 12, 29),  # noqa: DTZ001
    ),
    offset=_OFFSETS,
    minutes_only=st.booleans(),
)
def test_epoch_seconds_is_timestamp_in_any_fixed_zone(
    when: datetime, offset: int, minutes_only: bool
) -> None:
    if minutes_only:
        offset = int(offset / 60) * 60  # toward zero: -23:59:59 → -23:59
    text = when.isoformat(timespec="microseconds")
    sign = "-" if offset < 0 else "+"
    hours, rest = divmod(abs(offset), 3600)
    decoded = _decoded_ts(f"{text}{sign}{hours:02}:{rest // 60:02}") if minutes_only else None
    for ts in (
        when.replace(tzinfo=timezone(timedelta(seconds=offset))),
        when.replace(tzinfo=UTC),
        decoded,
    ):
        if ts is not None:
            assert epoch_seconds(ts) == ts.timestamp(), ts
            assert epoch_seconds(ts) == ts.timestamp(), ts  # its zone's epoch remembered


class _Shifted(datetime):
    """A datetime subclass with its own arithmetic: `epoch_seconds` must not use it."""

    def __sub__(self, other: object) -> timedelta:  # type: ignore[override]
        return timedelta(days=1)

    def timestamp(self) -> float:
        return 42.0


def test_epoch_seconds_of_other_datetimes_is_timestamp() -> None:
    # what decode never gives: naive times (local time) and zones with changing offsets
    for ts in (
        datetime(2026, 3, 29, 1, 30),  # noqa: DTZ001
        datetime(2026, 3, 29, 2, 30, tzinfo=ZoneInfo("Europe/Berlin")),
        datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=ZoneInfo("Europe/Berlin")),
        datetime(2026, 12, 3, 9, 0, 0, 1, tzinfo=timezone(timedelta(microseconds=-7))),
        _Shifted(2026, 12, 3, 9, tzinfo=UTC),
    ):
        assert epoch_seconds(ts) == ts.timestamp()


def test_the_remembered_epochs_stay_bounded() -> None:
    for minutes in range(600):
        ts = datetime(2026, 12, 3, tzinfo=timezone(timedelta(minutes=minutes - 300)))
        assert epoch_seconds(ts) == ts.timestamp()
    assert len(expiry._EPOCHS) <= 256


def _drive(index: ExpiryIndex, steps: list[tuple[str, int, str, datetime, bool]], *, at: bool):
    out: list[object] = []
    for op, partition, session, ts, ended in steps:
        if op == "touch":
            if at:
                index.touch_at(partition, session, ts.timestamp(), ended=ended)
            else:
                index.touch(partition, session, ts, ended=ended)
        elif op == "forget":
            index.forget(partition, session)
        else:
            out.append(index.due_at(partition, ts.timestamp()) if at else index.due(partition, ts))
    out.append(index.sessions())
    return out


def test_touch_at_and_due_at_decide_as_touch_and_due_in_any_zone() -> None:
    rng = random.Random(11)
    start = datetime(2026, 12, 2, 9, tzinfo=UTC)
    steps: list[tuple[str, int, str, datetime, bool]] = []
    clock = start
    for _ in range(5000):
        clock += timedelta(microseconds=rng.randrange(0, 40_000_000))
        ts = (clock - timedelta(seconds=rng.randrange(0, 30))).astimezone(rng.choice(ZONES))
        op = rng.choice(("touch", "touch", "due", "due", "forget"))
        steps.append((op, rng.randrange(3), f"s{rng.randrange(40)}", ts, rng.random() < 0.2))

    def index() -> ExpiryIndex:
        return ExpiryIndex(idle_ttl=timedelta(minutes=3), ended_retention=timedelta(seconds=20))

    by_datetime = _drive(index(), steps, at=False)
    by_seconds = _drive(index(), steps, at=True)
    assert by_seconds == by_datetime
    assert any(found for found in by_datetime[:-1])  # sessions did expire


def test_due_at_on_an_unknown_partition_or_with_nothing_due_is_empty() -> None:
    index = ExpiryIndex(idle_ttl=timedelta(minutes=1), ended_retention=timedelta(seconds=1))
    assert index.due_at(0, 0.0) == []
    index.touch_at(0, "a", 100.0, ended=False)
    assert index.due_at(0, 160.0) == []  # the deadline itself is not past it
    assert index.due_at(0, 159.0) == []  # the clock never goes back
    assert index.due_at(0, 160.5) == ["a"]
    assert index.sessions() == 0


def test_a_rebuilt_index_restores_the_partition_clock_from_the_newest_stored_session() -> None:
    # A first worker processed s_new's event at 10:30 (the partition's clock: 10:30),
    # committed, then an event of s_old at 09:00: its idle deadline 10:00 is already
    # behind the clock, so s_old expires at once. After a crash, the worker that recovers
    # the committed records and replays s_old's event must decide the same.
    at = datetime(2026, 12, 3, 9, tzinfo=UTC)
    first = ExpiryIndex(timedelta(hours=1), timedelta(minutes=1))
    first.touch(0, "s_new", at + timedelta(minutes=90), ended=False)
    assert first.due(0, at + timedelta(minutes=90)) == []
    first.touch(0, "s_old", at, ended=False)
    assert first.due(0, at) == ["s_old"]

    recovered = ExpiryIndex(timedelta(hours=1), timedelta(minutes=1))
    recovered.touch(0, "s_new", at + timedelta(minutes=90), ended=False)  # read back
    recovered.touch(0, "s_old", at, ended=False)
    assert recovered.due(0, at) == ["s_old"]
    # a partition's clock is its own
    recovered.touch(1, "s_other", at, ended=False)
    assert recovered.due(1, at) == []
