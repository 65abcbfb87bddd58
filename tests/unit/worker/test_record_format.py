"""`streams.worker.record`: version 2 session records (a header, then JSON) round-trip,
records written by the code before them (version 1, all JSON) still load, and
`record_times` reads the same times from either as a full decode does."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pydantic_core
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loopwatch.streams.detector import SessionState
from loopwatch.streams.kafka.expiry import epoch_seconds
from loopwatch.streams.worker.record import (
    HEADER,
    RECORD_VERSION,
    SessionRecord,
    record_times,
)
from tests.support.pipeline import FakeTable, over_table

# Written by the code before version 2 (main at 719cde1), with a verdict and an episode
# not yet acknowledged.
VERSION_1 = (
    b'{"v":1,"state":{"version":2,"last_seq":2,"last_ts":"2026-12-02T09:00:02+00:00",'
    b'"calls":{"0c62c47956b745300618c2943153fd7c":"5985923ee0561b542073ae05a20088f1"},'
    b'"result":[null,0,false,""],"chain":[null,"",false,{},0],'
    b'"batch":["c377eaa974fc83007d3559ae8fcd355d",1,["bash"]],"step":[2027274164],'
    b'"episodes":[],"loops":0},"last_seq":2,"last_ts":"2026-12-02T09:00:02+00:00",'
    b'"unconfirmed":[[3,"{\\"verdict\\":\\"ok\\"}"]],"seen":1796202002.0,'
    b'"wall":1796202003.5,"episodes":[[3,"{\\"episode\\":1}"]]}'
)
# Written before contract 1.2: no `seen`, no `wall`; an ended session.
VERSION_1_ENDED = (
    b'{"v":1,"state":null,"last_seq":7,"last_ts":"2026-12-02T10:00:00+02:00","unconfirmed":[]}'
)


def states() -> list[SessionState]:
    """Detector states of a few real sessions, at several lengths."""
    table = FakeTable()
    pipeline = over_table(table)
    found: list[SessionState] = []
    for seq in range(12):
        event: dict[str, object] = {"v": 1, "session_id": "s1", "seq": seq}
        event["ts"] = f"2026-12-02T09:00:{seq:02d}Z"
        call = f"call_{seq // 2}"
        if seq % 2 == 0:
            command = {"command": f"pytest tests/test_{seq % 3}.py"}
            event |= {"type": "assistant_message", "text": None}
            event["tool_calls"] = [{"id": call, "name": "bash", "arguments": command}]
        else:
            event |= {"type": "tool_result", "call_id": call, "tool_name": "bash"}
            event |= {"result": {"stdout": "FAILED", "exit_code": 1}, "error": None}
        pipeline.process(b"s1", json.dumps(event).encode())
        state = SessionRecord.decode(table[b"s1"]).state
        assert state is not None
        found.append(state)
    return found


STATES = states()
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
unconfirmed = st.lists(
    st.tuples(st.integers(0, 2**40), texts.map(lambda text: json.dumps(text).encode())),
    max_size=3,
).map(tuple)
zones = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone.min])
# (hypothesis takes naive bounds and the zones apart)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1),  # noqa: DTZ001
    max_value=datetime(2100, 1, 1),  # noqa: DTZ001
    timezones=zones,
)
stamps = st.floats(min_value=0, max_value=4e9, allow_nan=False)
records = st.builds(
    SessionRecord,
    state=st.none() | st.sampled_from(STATES),
    last_seq=st.integers(0, 2**53),
    last_ts=moments,
    unconfirmed=unconfirmed,
    unconfirmed_episodes=unconfirmed,
    seen=st.none() | stamps,
    seen_wall=st.none() | stamps,
)


@settings(max_examples=300)
@given(records)
def test_a_record_round_trips(record: SessionRecord) -> None:
    encoded = record.encode()
    assert encoded[0] == RECORD_VERSION
    assert SessionRecord.decode(encoded) == record
    times = record_times(encoded)
    assert (times.seen_at, times.ended, times.seen_wall) == (
        record.seen_at,
        record.ended,
        record.seen_wall,
    )


@settings(max_examples=100)
@given(records)
def test_a_record_and_its_state_at_the_same_time_share_it(record: SessionRecord) -> None:
    """The pipeline's records hold the event's time in the record and in its state: it
    is written the same as two equal datetimes are, and read back as one object."""
    assume(record.state is not None)
    assert record.state is not None
    shared = dataclasses.replace(
        record, state=dataclasses.replace(record.state, last_ts=record.last_ts)
    )
    equal = datetime.fromisoformat(record.last_ts.isoformat())
    apart = dataclasses.replace(record, state=dataclasses.replace(record.state, last_ts=equal))
    assert shared.encode() == apart.encode()
    decoded = SessionRecord.decode(shared.encode())
    assert decoded == shared
    assert decoded.state is not None and decoded.last_ts is decoded.state.last_ts
    assert decoded.encode() == shared.encode()


@settings(max_examples=200)
@given(records)
def test_the_json_is_byte_for_byte_what_pydantic_core_writes(record: SessionRecord) -> None:
    """orjson writes the records (faster); the bytes are those the worker wrote with
    pydantic-core before, so a changelog's records do not change with the encoder."""
    body = record.encode()[HEADER.size :]
    assert body == pydantic_core.to_json(pydantic_core.from_json(body))


@pytest.mark.parametrize("seq", [2**63 - 1, 2**64 - 1, 2**64, 2**70])
def test_a_seq_beyond_64_bits_round_trips(seq: int) -> None:
    """orjson refuses integers beyond 64 bits; an event's `seq` has no upper bound."""
    record = SessionRecord(
        STATES[3], seq, datetime(2026, 12, 2, 9, tzinfo=UTC), unconfirmed=((seq, b"{}"),)
    )
    encoded = record.encode()
    assert str(seq).encode() in encoded
    assert SessionRecord.decode(encoded) == record


def test_a_version_1_record_loads_and_its_times_read_alike() -> None:
    record = SessionRecord.decode(VERSION_1)
    assert record.state is not None and record.state.last_seq == 2
    assert record.last_seq == 2
    assert record.last_ts == datetime(2026, 12, 2, 9, 0, 2, tzinfo=UTC)
    assert record.unconfirmed == ((3, b'{"verdict":"ok"}'),)
    assert record.unconfirmed_episodes == ((3, b'{"episode":1}'),)
    assert (record.seen, record.seen_wall) == (1796202002.0, 1796202003.5)
    assert tuple(record_times(VERSION_1)) == (1796202002.0, False, 1796202003.5)
    # written again, it is version 2 and the same record
    assert SessionRecord.decode(record.encode()) == record


def test_a_version_1_record_without_seen_counts_from_its_last_event() -> None:
    record = SessionRecord.decode(VERSION_1_ENDED)
    assert record.ended and record.seen is None and record.seen_wall is None
    expected = epoch_seconds(datetime(2026, 12, 2, 8, 0, tzinfo=UTC))
    assert record.seen_at == expected
    assert tuple(record_times(VERSION_1_ENDED)) == (expected, True, None)
    assert tuple(record_times(record.encode())) == (expected, True, None)


def test_version_2_is_smaller_than_version_1() -> None:
    record = SessionRecord.decode(VERSION_1)
    assert len(record.encode()) < len(VERSION_1)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x02",  # a header cut short
        bytes([RECORD_VERSION]) + bytes(HEADER.size - 1),  # no JSON after it
        b"\x03" + bytes(HEADER.size) + b"{}",  # an unknown version
        b'{"v":3,"state":null}',
        b"{not json",
        b"[1]",
    ],
)
def test_what_is_not_a_record_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError, match=r"session record|session state|JSON object"):
        SessionRecord.decode(data)
    if data[:1] != bytes([RECORD_VERSION]) or len(data) < HEADER.size:
        with pytest.raises(ValueError):
            record_times(data)
