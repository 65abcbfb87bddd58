"""The client's pure parts: event encoding (local fingerprints), the ledger, partitioning."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from aiokafka.partitioner import murmur2

from loopwatch.models import (
    AssistantMessage,
    DetectionConfig,
    LoopVerdict,
    LoopWarning,
    ToolResult,
    decode_event,
    text_fingerprint,
)
from loopwatch.streams.client.encoding import WITHHELD_ERROR, Call, EventEncoder
from loopwatch.streams.client.ledger import Ledger, PlacedWarning, warnings_by_message
from loopwatch.streams.client.reader import partition_for
from loopwatch.streams.scan.scanner import Scanner

TS = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def encode_session(local: bool) -> list[bytes]:
    """A session that loops on a failing edit, then on a repeated read."""
    enc = EventEncoder(session_id="s", agent_id="a", local_fingerprints=local)
    records = [enc.user(0, TS, "secret task")]
    seq = 1
    for n in range(3):
        call = Call(f"e{n}", "edit_file", {"path": "/x.py", "old": "secret", "human_intent": n})
        records.append(enc.assistant(seq, TS, "trying", [call]))
        records.append(
            enc.tool_result(
                seq + 1, TS, call_id=call.id, tool_name="edit_file", result=None, error="no match"
            )
        )
        seq += 2
    for n in range(3):
        call = Call(f"r{n}", "read_file", {"path": "/y.py"})
        records.append(enc.assistant(seq, TS, None, [call]))
        records.append(
            enc.tool_result(
                seq + 1,
                TS,
                call_id=call.id,
                tool_name="read_file",
                result={"text": "token=abc", "elapsed_ms": n},
                error=None,
            )
        )
        seq += 2
    return records


def verdicts(records: list[bytes]) -> list[LoopVerdict]:
    return list(Scanner(DetectionConfig()).run(decode_event(r) for r in records))


def test_local_fingerprints_give_the_same_verdicts_as_raw_content() -> None:
    raw, local = encode_session(local=False), encode_session(local=True)
    raw_verdicts, local_verdicts = verdicts(raw), verdicts(local)
    assert [v.warning for v in local_verdicts] == [v.warning for v in raw_verdicts]
    assert {v.warning.rule for v in raw_verdicts if v.warning} == {
        "repeated_failed_mutation",
        "repeated_result",
        "repeated_batch",
    }


def test_local_fingerprints_keep_raw_content_at_home() -> None:
    for record in encode_session(local=True):
        text = record.decode()
        for secret in ("secret", "no match", "token=abc", "/x.py", "trying"):
            assert secret not in text
        event = decode_event(record)
        if isinstance(event, AssistantMessage):
            assert all(c.fingerprint and c.arguments == {} for c in event.tool_calls)
        if isinstance(event, ToolResult):
            assert event.call_fingerprint and event.result_fingerprint
            assert event.error in (None, WITHHELD_ERROR)


def test_records_are_valid_events_with_the_session_key_fields() -> None:
    enc = EventEncoder(session_id="s-1", agent_id=None, local_fingerprints=False)
    record = json.loads(enc.assistant(7, TS, "hi", [Call("c", "bash", {"cmd": "ls"})]))
    assert record["seq"] == 7 and record["session_id"] == "s-1" and "agent_id" not in record
    assert decode_event(enc.end(8, TS)).type == "session_end"


def verdict(seq: int, warned: bool) -> LoopVerdict:
    warning = LoopWarning(
        rule="repeated_batch", tool_names=("bash",), count=3, threshold=3, message=f"w{seq}"
    )
    return LoopVerdict(
        session_id="s",
        seq=seq,
        agent_id=None,
        event_ts=TS,
        evaluated_at=TS,
        warning=warning if warned else None,
    )


def test_ledger_anchors_warnings_to_their_messages() -> None:
    ledger = Ledger()
    for seq, message in ((0, 0), (1, 1), (2, 2), (3, 2)):  # two events of message 2
        ledger.published(seq, message)
    assert not ledger.has_verdict(3)
    for seq in range(4):
        assert ledger.received(verdict(seq, warned=seq in (1, 3)))
    assert ledger.has_verdict(3)
    assert not ledger.received(verdict(2, warned=True))  # redelivered: ignored
    assert ledger.placed() == []  # reading hands nothing out
    assert warnings_by_message(ledger.hand_out()) == {1: ["w1"], 2: ["w3"]}
    assert warnings_by_message(ledger.placed()) == {1: ["w1"], 2: ["w3"]}


def test_ledger_appends_a_late_warning_instead_of_rewriting_the_prompt() -> None:
    ledger = Ledger()
    ledger.published(0, 0)
    ledger.published(1, 1)
    assert ledger.hand_out() == []  # prompt built before the verdicts came
    ledger.published(2, 2)
    ledger.published(3, 3)
    ledger.received(verdict(0, warned=False))
    ledger.received(verdict(1, warned=True))  # late: message 1 is already in a prompt
    ledger.received(verdict(2, warned=True))  # on time: message 2 is new
    before = ledger.placed()
    assert warnings_by_message(ledger.placed()) == {}  # reading anchors nothing
    assert ledger.placed() == before
    assert warnings_by_message(ledger.hand_out()) == {3: ["w1"], 2: ["w2"]}
    assert warnings_by_message(ledger.hand_out()) == {3: ["w1"], 2: ["w2"]}  # stable once placed


def test_warnings_by_message_maps_indexes_and_leaves_out_trimmed_messages() -> None:
    placed = [
        PlacedWarning(0, 4, verdict(0, warned=True).warning),
        PlacedWarning(1, 7, verdict(1, warned=True).warning),
        PlacedWarning(2, None, verdict(2, warned=True).warning),
    ]
    assert warnings_by_message(placed) == {4: ["w0"], 7: ["w1"]}
    assert warnings_by_message(placed, {7: 0}.get) == {0: ["w1"]}


def test_partition_for_matches_the_java_client_murmur2() -> None:
    # vectors of the Java client's Utils.murmur2 (signed there, unsigned here)
    java = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536}
    for data, signed in java.items():
        assert murmur2(data) == signed & 0xFFFFFFFF
    for session_id in ("s-1", "tau-airline-t0-r0", "ü-session"):
        expected = (murmur2(session_id.encode()) & 0x7FFFFFFF) % 12
        assert partition_for(session_id, 12) == expected
    assert {partition_for(f"s{i}", 6) for i in range(200)} == set(range(6))


def test_a_condensation_is_a_context_condensed_event() -> None:
    enc = EventEncoder(session_id="s-1", agent_id="a", local_fingerprints=True)
    event = decode_event(enc.condensed(9, TS))
    assert event.type == "context_condensed" and event.seq == 9 and event.agent_id == "a"


def test_local_fingerprints_send_an_assistant_text_as_its_fingerprint_only() -> None:
    enc = EventEncoder(session_id="s-1", agent_id=None, local_fingerprints=True)
    record = json.loads(enc.assistant(0, TS, "Let me try that again.", []))
    assert "text" not in record
    assert record["text_fingerprint"] == text_fingerprint("Let me try that again.")
    assert "text" not in json.loads(enc.user(1, TS, "please fix it"))  # none but §9.14's


def test_a_repeated_message_is_warned_alike_with_local_fingerprints() -> None:
    """§9.14 reads `text_fingerprint` in preference to `text`: a runtime that keeps its
    texts at home gets the repeated-message warning a raw one gets."""
    extended = Scanner(DetectionConfig(profile="extended"))
    warned = {}
    for local in (False, True):
        enc = EventEncoder(session_id=f"s-{local}", agent_id=None, local_fingerprints=local)
        records = [enc.user(0, TS, "go")]
        records += [enc.assistant(seq, TS, "I am stuck.", []) for seq in range(1, 5)]
        warned[local] = [
            v.warning.rule if v.warning else None
            for v in extended.run(decode_event(r) for r in records)
        ]
    assert warned[True] == warned[False]
    assert "repeated_message" in warned[True]
