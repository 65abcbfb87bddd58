"""The worker app's record handling (`handle_fetched`, `RecordHandler.handle`) in faust's
`test_context()`: verdicts, warnings, dead letters, duplicates, state lifecycle and
metrics, with the memory store and recording sinks."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from loopwatch.models import DetectionConfig
from loopwatch.streams.kafka.dead_letters import HEADER_ERROR, HEADER_OFFSET
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.worker.record import SessionRecord
from tests.stream.conftest import Harness
from tests.support.builders import SessionBuilder


def _without_clock(payload: bytes | None) -> dict[str, Any]:
    assert payload is not None
    verdict: dict[str, Any] = json.loads(payload)
    verdict.pop("evaluated_at")
    return verdict


def _looping_session(session_id: str = "s1") -> SessionBuilder:
    b = SessionBuilder(session_id)
    b.user("fix the bug")
    for _ in range(3):
        b.step(("read_file", {"path": "a.py"}))
    return b


async def test_verdicts_equal_scan_and_warnings_go_to_both_topics(harness: Harness) -> None:
    b = _looping_session()
    for event in b.events:
        await harness.put_event(event)

    expected = [v.model_dump(mode="json") for v in Scanner(DetectionConfig()).run(b.events)]
    for verdict in expected:
        verdict.pop("evaluated_at")
    assert [_without_clock(s.value) for s in harness.on("verdicts")] == expected
    warned = [v for v in expected if v["warning"] is not None]
    assert warned, "the session loops: at least one warning"
    assert [_without_clock(s.value) for s in harness.on("warnings")] == warned
    assert {s.key for s in harness.sent} == {b"s1"}
    stored = SessionRecord.decode(harness.table[b"s1"])
    assert stored.last_seq == b.events[-1].seq


@pytest.mark.parametrize(
    ("value", "key", "kind"),
    [
        (b"\xff\xfe", b"s1", "not_utf8"),
        (b"{not json", b"s1", "not_json"),
        (b'{"type": "user_message", "session_id": "s1"}', b"s1", "schema"),
        (
            b'{"type":"user_message","session_id":"other","seq":5,"ts":"2026-12-02T09:00:00Z"}',
            b"s1",
            "key_mismatch",
        ),
        (b'{"pad": "' + b"x" * 5000 + b'"}', b"s1", "too_large"),
        (None, b"s1", "empty"),
    ],
)
async def test_bad_record_goes_to_dead_letters_between_good_ones(
    harness: Harness, value: bytes | None, key: bytes, kind: str
) -> None:
    b = SessionBuilder("s1")
    first, second = b.user(), b.text()
    await harness.put_event(first)
    await harness.put(value, key=key)
    await harness.put_event(second)

    assert [json.loads(s.value or b"")["seq"] for s in harness.on("verdicts")] == [0, 1]
    (letter,) = harness.on("dead_letters")
    assert letter.value == value
    assert letter.key == key
    headers = dict(letter.headers or [])
    assert headers[HEADER_ERROR] == kind.encode()
    assert headers[HEADER_OFFSET] == b"1"
    assert f'loopwatch_dead_letters_total{{error="{kind}"}} 1.0' in harness.metrics_text()


async def test_duplicate_and_out_of_order_events_get_no_second_verdict(harness: Harness) -> None:
    b = _looping_session()
    for event in b.events:
        await harness.put_event(event)
    before = list(harness.sent)
    await harness.put_event(b.events[-1])
    await harness.put_event(b.events[1])

    assert harness.sent == before
    assert "loopwatch_duplicates_skipped_total 2.0" in harness.metrics_text()


async def test_replay_of_an_unacknowledged_verdict_resends_the_same_verdict(
    harness_factory: Callable[[], Awaitable[Harness]],
) -> None:
    first_worker = await harness_factory()
    b = _looping_session()
    for event in b.events[:-1]:
        await first_worker.put_event(event)
    first_worker.hold_acks = True  # the broker never acknowledges the last verdict
    await first_worker.put_event(b.events[-1])
    assert first_worker.pending
    assert not any(future.done() for future in first_worker.pending)
    await first_worker.put_event(b.events[-1])  # in flight here: not sent twice
    assert len(first_worker.on("verdicts")) == len(b.events)

    # A new worker recovers the table (state stored with the verdict unconfirmed) and
    # reads the uncommitted record again: it sends the identical verdict.
    second_worker = await harness_factory()
    for key, value in first_worker.table.data.items():
        second_worker.table.data[key] = value
    await second_worker.put_event(b.events[-1])
    (again,) = second_worker.on("verdicts")
    assert again.value == first_worker.on("verdicts")[-1].value
    assert "loopwatch_verdicts_resent_total 1.0" in second_worker.metrics_text()
    # ... and writes the stored value back unchanged, so the changelog has it even when
    # the first worker's store (RocksDB) held a write whose changelog record was lost.
    (written,) = second_worker.changelog
    assert written.value == first_worker.table.data[b"s1"]


async def test_acknowledged_verdicts_leave_the_stored_record(harness: Harness) -> None:
    b = _looping_session()
    for event in b.events[:-1]:
        await harness.put_event(event)
    stored = SessionRecord.decode(harness.table[b"s1"])
    assert stored.unconfirmed == ()  # every verdict acknowledged before the write
    harness.hold_acks = True  # the broker never acknowledges the last verdict
    await harness.put_event(b.events[-1])
    stored = SessionRecord.decode(harness.table[b"s1"])
    # Only the verdict still in flight is kept, for a replay to send again.
    assert [seq for seq, _ in stored.unconfirmed] == [b.events[-1].seq]


async def test_session_end_deletes_the_state(harness: Harness) -> None:
    b = _looping_session()
    b.end()
    for event in b.events:
        await harness.put_event(event)
    assert b"s1" not in harness.table
    assert len(harness.on("verdicts")) == len(b.events)
    assert 'loopwatch_sessions_expired_total{reason="ended"} 1.0' in harness.metrics_text()


@pytest.mark.parametrize("settings_overrides", [{"ended_retention_seconds": 60}])
async def test_ended_session_is_kept_for_its_retention_then_deleted(harness: Harness) -> None:
    b = _looping_session()
    end = b.end()
    for event in b.events:
        await harness.put_published(event)
    assert SessionRecord.decode(harness.table[b"s1"]).ended
    await harness.put_published(end)  # a replay within the retention is still a duplicate
    assert len(harness.on("verdicts")) == len(b.events)

    later = SessionBuilder("s2")
    later.seq = end.seq + 61  # event time 61 s after the end
    await harness.put_published(later.user())
    assert b"s1" not in harness.table
    assert b"s2" in harness.table


@pytest.mark.parametrize("settings_overrides", [{"session_ttl_seconds": 3600}])
async def test_idle_session_is_swept_on_the_log_clock(harness: Harness) -> None:
    idle = SessionBuilder("idle")
    await harness.put_published(idle.user())
    busy = SessionBuilder("busy")
    await harness.put_published(busy.user())
    assert b"idle" in harness.table

    busy.seq = 3601
    await harness.put_published(busy.user())
    assert b"idle" not in harness.table
    assert b"busy" in harness.table
    assert 'loopwatch_sessions_expired_total{reason="idle"} 1.0' in harness.metrics_text()

    # A new event of the expired session starts it afresh.
    idle.seq = 4000
    await harness.put_published(idle.user())
    assert SessionRecord.decode(harness.table[b"idle"]).last_seq == 4000


@pytest.mark.parametrize("settings_overrides", [{"session_ttl_seconds": 3600}])
async def test_a_session_idle_in_its_own_event_time_is_reset_and_says_so(
    harness: Harness,
) -> None:
    b = SessionBuilder("s1")
    await harness.put_event(b.user())  # published now, stamped at seq 0
    b.seq = 3601  # its own clock says an hour and a second later
    await harness.put_event(b.user())
    verdicts = [json.loads(sent.value or b"") for sent in harness.on("verdicts")]
    assert ["state_reset" in v for v in verdicts] == [False, True]
    assert verdicts[1]["state_reset"] is True
    assert "loopwatch_session_state_resets_total 1.0" in harness.metrics_text()


async def test_metrics_count_by_type_rule_and_agent_without_session_ids(harness: Harness) -> None:
    b = _looping_session("secret-session-id")
    for event in b.events:
        await harness.put_event(event)
    text = harness.metrics_text()
    assert 'loopwatch_events_total{type="user_message"} 1.0' in text
    assert 'loopwatch_events_total{type="assistant_message"} 3.0' in text
    assert "loopwatch_verdicts_total 4.0" in text
    assert 'loopwatch_warnings_total{agent_id="agent-a",rule="repeated_batch"}' in text
    assert "loopwatch_active_sessions 1.0" in text
    assert "loopwatch_event_to_verdict_seconds_count" in text
    assert "secret-session-id" not in text


async def test_a_commit_writes_one_changelog_record_per_session_before_its_flush(
    harness: Harness,
) -> None:
    one, two = _looping_session("s1"), _looping_session("s2")
    for first, second in zip(one.events, two.events, strict=True):
        await harness.put_event(first)
        await harness.put_event(second)
    # Between commits the newest records are only noted: the verdicts went out already.
    assert len(harness.on("verdicts")) == len(one.events) * 2
    assert _changelog_sent(harness) == []
    assert harness.app.loopwatch_store.pending == 2
    # The consumer's hook before each offset commit writes them, then flushes.
    await harness.app.transport.before_commit()
    written = _changelog_sent(harness)
    assert sorted(s.key for s in written) == [b"s1", b"s2"]
    for sent in written:
        assert sent.value is not None
        assert SessionRecord.decode(sent.value).last_seq == one.events[-1].seq
    assert harness.app.loopwatch_store.pending == 0
    await harness.app.transport.before_commit()
    assert len(_changelog_sent(harness)) == 2  # nothing new to write


def _changelog_sent(harness: Harness) -> list[Any]:
    """Changelog records sent so far (`harness.changelog` writes the noted ones first)."""
    return [s for s in harness.outputs.sent if s.topic == "changelog"]
