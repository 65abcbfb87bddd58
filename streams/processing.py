"""The per-record pipeline, without Kafka: bytes in, outcome out.

decode → check key and size → skip duplicates → `observe` → new table value + verdict.
The faust agent (`streams.agents`) only carries the outcome out: table write, sends,
metrics. Keeping this a plain function makes it testable against a list of records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from models import AgentEvent, DetectionConfig, InvalidEvent, LoopVerdict, decode_event
from streams.dead_letters import DeadLetter, DeadLetterKind
from streams.detector import observe
from streams.policy_book import PolicyBook
from streams.session_record import SessionRecord


@dataclass(frozen=True, slots=True)
class Processed:
    """A new event: publish `payload`, then store `record` (None: delete the key)."""

    event: AgentEvent
    verdict: LoopVerdict
    payload: bytes
    record: SessionRecord | None


@dataclass(frozen=True, slots=True)
class Duplicate:
    """`seq` not above the session's last: no state change. `resend` is the stored verdict
    of this seq when its earlier send was never acknowledged (same verdict, sent again)."""

    event: AgentEvent
    resend: bytes | None


@dataclass(frozen=True, slots=True)
class Rejected:
    """Not processed: goes to the dead-letter topic."""

    letter: DeadLetter


Outcome = Processed | Duplicate | Rejected

_DECODE_KINDS: dict[str, DeadLetterKind] = {"not_utf8": "not_utf8", "not_json": "not_json"}


def process_record(
    key: bytes | None,
    value: bytes | None,
    load: Callable[[str], bytes | None],
    config: DetectionConfig,
    *,
    max_event_bytes: int,
    now: datetime,
    is_unconfirmed: Callable[[str, int], bool],
    sent_by_this_worker: Callable[[str, int], bool] = lambda _sid, _seq: False,
    drop_ended: bool = False,
    decode: Callable[[bytes], SessionRecord] = SessionRecord.decode,
    policies: PolicyBook | None = None,
) -> Outcome:
    """Process one record of `agent-events`; `load(session_id)` gives the session's
    stored table value (None when it has none).

    `is_unconfirmed(session_id, seq)` says whether that verdict's send is still in flight;
    stored verdicts it no longer knows of were acknowledged (or re-sent by a replay).
    `sent_by_this_worker(session_id, seq)`: that verdict is in flight or was acknowledged in
    this process, so a duplicate of its event needs no resend.
    `drop_ended`: delete the state at `session_end` at once instead of keeping an ended
    marker (see `streams.expiry`).
    `decode` turns the stored value into a `SessionRecord` (the agent passes a cached one).
    `policies`: per-agent policies (docs/contract.md §9.7); when given, the event's agent
    is judged by its policy instead of `config`, and the verdict names that policy.
    """
    if value is None:
        return Rejected(DeadLetter("empty", "record has no value"))
    if len(value) > max_event_bytes:
        return Rejected(DeadLetter("too_large", f"{len(value)} bytes > {max_event_bytes}"))
    try:
        event = decode_event(value)
    except InvalidEvent as exc:
        return Rejected(DeadLetter(_DECODE_KINDS.get(exc.kind, "schema"), exc.reason))
    if key is not None and key != event.session_id.encode():
        return Rejected(DeadLetter("key_mismatch", "record key differs from session_id"))

    try:
        stored = load(event.session_id)
        previous = None if stored is None else decode(stored)
        if previous is not None and event.seq <= previous.last_seq:
            # Resend only a verdict left unconfirmed by an earlier run of the worker: one
            # sent here is delivered (or the worker stops before committing the offset).
            sent_here = sent_by_this_worker(event.session_id, event.seq)
            resend = None if sent_here else previous.unconfirmed_verdict(event.seq)
            return Duplicate(event, resend)
        state = None if previous is None else previous.state
        policy = None
        if policies is not None:
            config, policy = policies.judge(event.agent_id)
        new_state, verdict = observe(state, event, config, evaluated_at=now, policy=policy)
    except Exception as exc:  # a detector bug must not stop the partition
        return Rejected(DeadLetter("internal", type(exc).__name__))
    if verdict is None:  # the detector saw a duplicate that the record did not
        return Duplicate(event, None)

    payload = verdict.to_json()
    still_unconfirmed = () if previous is None else previous.unconfirmed
    unconfirmed = (
        *(item for item in still_unconfirmed if is_unconfirmed(event.session_id, item[0])),
        (event.seq, payload),
    )
    record: SessionRecord | None
    if new_state is None and drop_ended:
        record = None
    else:
        record = SessionRecord(new_state, event.seq, event.ts, unconfirmed)
    return Processed(event, verdict, payload, record)
