"""The per-record pipeline, without Kafka: bytes in, state written, outcome out.

decode → check key and size → skip duplicates → `observe` → store the new session
record → expire sessions past their deadline (at most `SWEEP_PER_STEP` per record; the
worker sweeps the rest between records with `sweep`). The session state is read and written
through `SessionStore` (the faust table in the worker, a dict in tests); the caller
(`streams.worker.handler`) carries the outcome out: sends, dead letters, metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from loopwatch.models import (
    TOO_DEEP,
    AgentEvent,
    DetectionConfig,
    InvalidEvent,
    LoopEpisode,
    LoopVerdict,
    decode_event,
)
from loopwatch.streams.detector import (
    OpenEpisode,
    SessionState,
    expire_episodes,
    observe_episodes,
)
from loopwatch.streams.kafka.dead_letters import DeadLetter, DeadLetterKind
from loopwatch.streams.kafka.expiry import ExpiryIndex, epoch_seconds, idle_past
from loopwatch.streams.worker.policy_book import PolicyBook
from loopwatch.streams.worker.record import SessionRecord, Unconfirmed
from loopwatch.streams.worker.store import SessionStore

SWEEP_PER_STEP = 32
"""Sessions one sweep deletes at most (each costs a record decode and a table write): a
record's processing, or one event-loop turn of the worker's carried-over sweep."""


@dataclass(frozen=True, slots=True)
class PipelineOptions:
    detection: DetectionConfig
    max_event_bytes: int
    """A larger record goes to the dead-letter topic."""
    drop_ended: bool = False
    """Delete the state at `session_end` at once instead of keeping an ended marker
    (see `streams.kafka.expiry`)."""
    policies: PolicyBook | None = None
    """Per-agent policies (docs/contract.md §9.7): when given, an event's agent is judged
    by its policy instead of `detection`, and the verdict names that policy."""


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class Processed:
    """A new event: its record is stored (None: the session's key was deleted); publish
    `payload` and `episode_payloads`. `expired`: (session id, ended) of the sessions
    deleted after it, `expired_episodes` their open loop episodes, ended `expired` (and
    first those of this event's own session when its state was reset as idle,
    `verdict.state_reset`)."""

    event: AgentEvent
    verdict: LoopVerdict
    payload: bytes
    record: SessionRecord | None
    expired: tuple[tuple[str, bool], ...] = ()
    episodes: tuple[LoopEpisode, ...] = ()
    """Loop episodes this event closed; publish `episode_payloads` with the verdict."""
    episode_payloads: tuple[bytes, ...] = ()
    opened: tuple[OpenEpisode, ...] = ()
    """Loop episodes this event's warning started (for metrics)."""
    new_session: bool = False
    """The session had no stored state before this event."""
    first_loop: bool = False
    """`opened` holds the session's first loop episode."""
    expired_episodes: tuple[LoopEpisode, ...] = ()


@dataclass(frozen=True, slots=True)
class Duplicate:
    """`seq` not above the session's last: no state change. `resend` is the stored verdict
    of this seq when its earlier send was never acknowledged (same verdict, sent again).
    `replayed`: its verdict was not sent by this process (a record read again after a
    restart). `resend_episodes`: the loop episodes that event closed, likewise."""

    event: AgentEvent
    resend: bytes | None
    replayed: bool = False
    resend_episodes: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class Rejected:
    """Not processed: goes to the dead-letter topic."""

    letter: DeadLetter


Outcome = Processed | Duplicate | Rejected

_DECODE_KINDS: dict[str, DeadLetterKind] = {"not_utf8": "not_utf8", "not_json": "not_json"}


def process_record(
    key: bytes | None,
    value: bytes | None,
    store: SessionStore,
    options: PipelineOptions,
    expiry: ExpiryIndex,
    *,
    partition: int,
    now: datetime,
    log_time: float | None = None,
) -> Outcome:
    """Process one record of `agent-events` read from `partition`; `now` stamps the
    verdict; `log_time` is the record's Kafka timestamp (epoch seconds; None: `now`), the
    idle sweep's clock (`streams.kafka.expiry`). Stores the session's new record and
    deletes expired sessions through `store` (faust: while this record is current, as
    its table requires).

    Never raises: a failure anywhere in it (decode, observe, verdict or state encoding,
    expiry) is an `internal` dead letter naming the exception type, so that one record
    cannot stop its partition (faust would restart the agent on the same record for
    ever). What the store already holds of that record stays.
    """
    # a try here rather than a decorator: this runs for every record
    try:
        return _process(
            key, value, store, options, expiry, partition=partition, now=now, log_time=log_time
        )
    except Exception as exc:
        return Rejected(DeadLetter("internal", type(exc).__name__))


def _observe_failure(exc: Exception) -> DeadLetter:
    """A failure to judge a decoded event: input too deep to fingerprint is bad input
    (`schema`, as `loopwatch scan` says too), anything else a bug (`internal`)."""
    if isinstance(exc, RecursionError):
        return DeadLetter("schema", TOO_DEEP.reason)
    return DeadLetter("internal", type(exc).__name__)


def _process(
    key: bytes | None,
    value: bytes | None,
    store: SessionStore,
    options: PipelineOptions,
    expiry: ExpiryIndex,
    *,
    partition: int,
    now: datetime,
    log_time: float | None = None,
) -> Outcome:
    if value is None:
        return Rejected(DeadLetter("empty", "record has no value"))
    if len(value) > options.max_event_bytes:
        return Rejected(DeadLetter("too_large", f"{len(value)} bytes > {options.max_event_bytes}"))
    try:
        event = decode_event(value)
    except InvalidEvent as exc:
        return Rejected(DeadLetter(_DECODE_KINDS.get(exc.kind, "schema"), exc.reason))
    if key is not None and key != event.session_id.encode():
        return Rejected(DeadLetter("key_mismatch", "record key differs from session_id"))

    session_id = event.session_id
    try:
        previous = store.get(session_id)
        if previous is not None and event.seq <= previous.last_seq:
            # Resend only a verdict left unconfirmed by an earlier run of the worker: one
            # sent here is delivered (or the worker stops before committing the offset).
            if store.sent_here(session_id, event.seq):
                return Duplicate(event, None)
            return Duplicate(
                event,
                previous.unconfirmed_verdict(event.seq),
                replayed=True,
                resend_episodes=previous.unconfirmed_episodes_of(event.seq),
            )
        state, reset_episodes = _after_idleness(previous, event, expiry.idle_ttl)
        config, policy = options.detection, None
        if options.policies is not None:
            config, policy = options.policies.judge(event.agent_id)
        observation = observe_episodes(state, event, config, evaluated_at=now, policy=policy)
        new_state, verdict = observation.state, observation.verdict
    except Exception as exc:  # a detector bug must not stop the partition
        return Rejected(_observe_failure(exc))
    if verdict is None:  # the detector saw a duplicate that the record did not
        return Duplicate(event, None, replayed=not store.sent_here(session_id, event.seq))
    if reset_episodes is not None:
        verdict = verdict.model_copy(update={"state_reset": True})

    payload = verdict.to_json()
    seq = event.seq
    closed = observation.closed
    # Most events close no episode and find nothing left unconfirmed: no generators then.
    episode_payloads = tuple(episode.to_json() for episode in closed) if closed else ()
    unconfirmed: tuple[tuple[int, bytes], ...] = ((seq, payload),)
    unconfirmed_episodes = tuple((seq, p) for p in episode_payloads) if closed else ()
    if previous is not None:
        # Kept until every record of that event is acknowledged (`store.is_unconfirmed`).
        if previous.unconfirmed:
            unconfirmed = _carried(previous.unconfirmed, store, session_id, unconfirmed)
        if previous.unconfirmed_episodes:
            unconfirmed_episodes = _carried(
                previous.unconfirmed_episodes, store, session_id, unconfirmed_episodes
            )
    record: SessionRecord | None
    seen, wall = _clocks(expiry, partition, log_time, now)
    if new_state is None and options.drop_ended:
        record = None
        store.delete(session_id)
        expiry.forget(partition, session_id)
    else:
        record = SessionRecord(
            new_state, seq, event.ts, unconfirmed, unconfirmed_episodes, seen, wall
        )
        store.set(session_id, record)
        expiry.touch_at(partition, session_id, seen, ended=new_state is None, wall=wall)
    expired_episodes: list[LoopEpisode] = list(reset_episodes or ())
    expired = _sweep_into(
        expiry.due_at(partition, seen, wall, SWEEP_PER_STEP), store, expired_episodes
    )
    return Processed(
        event,
        verdict,
        payload,
        record,
        expired,
        observation.closed,
        episode_payloads,
        observation.opened,
        new_session=state is None,
        first_loop=bool(observation.opened) and (state is None or state.loops == 0),
        expired_episodes=tuple(expired_episodes),
    )


@dataclass(frozen=True, slots=True)
class Swept:
    """What a sweep between records deleted: (session id, ended) of each session, and
    their open loop episodes, ended `expired`."""

    expired: tuple[tuple[str, bool], ...]
    episodes: tuple[LoopEpisode, ...]


def sweep(
    store: SessionStore, expiry: ExpiryIndex, partition: int, limit: int = SWEEP_PER_STEP
) -> Swept:
    """Delete at most `limit` more of the sessions a record of `partition` left due
    (`ExpiryIndex.carried_over`). The caller makes the partition's table writes current
    (faust: `SessionTable.writing_in`), as a record's processing does."""
    episodes: list[LoopEpisode] = []
    expired = _sweep_into(expiry.due_again(partition, limit), store, episodes)
    return Swept(expired, tuple(episodes))


def _sweep_into(
    due: list[str], store: SessionStore, episodes: list[LoopEpisode]
) -> tuple[tuple[str, bool], ...]:
    """Delete the `due` sessions' records; their open loops end with them (contract §8),
    added to `episodes`. Returns (session id, ended) of each deleted."""
    if not due:
        return ()
    expired = []
    for session_id in due:
        stored = store.get(session_id)
        if stored is not None:
            if stored.state is not None:
                episodes.extend(expire_episodes(stored.state, session_id))
            store.delete(session_id)
            expired.append((session_id, stored.ended))
    return tuple(expired)


def _clocks(
    expiry: ExpiryIndex, partition: int, log_time: float | None, now: datetime
) -> tuple[float, float]:
    """When this record is seen: the partition's log clock moved by it, and the
    worker's clock (epoch seconds both; `streams.kafka.expiry`)."""
    wall = epoch_seconds(now)
    return expiry.advance(partition, log_time, wall), wall


def _after_idleness(
    previous: SessionRecord | None, event: AgentEvent, idle_ttl: timedelta
) -> tuple[SessionState | None, tuple[LoopEpisode, ...] | None]:
    """The state `event` is judged on, and (when the session's own event time jumped more
    than the TTL since its previous event: contract §8.5, as `scan`) the open episodes of
    the state it reset, which end `expired`; None when nothing was reset."""
    if previous is None or previous.state is None:
        return None, None
    if not idle_past(previous.last_ts, event.ts, idle_ttl):
        return previous.state, None
    return None, tuple(expire_episodes(previous.state, event.session_id))


def _carried(
    items: Unconfirmed, store: SessionStore, session_id: str, new: Unconfirmed
) -> Unconfirmed:
    """`items` from the first whose event's records are not all acknowledged yet (they
    are in event order, and acknowledged nearly in that order), then `new`.

    Only the acknowledged front goes: one acknowledged behind one in flight stays until
    that one is acknowledged too, and the commit's write leaves it out
    (`TableSessionStore._unconfirmed_only`). So this costs O(1) per event when a backlog
    is processed faster than its sends are acknowledged, where checking every item each
    time was a large share of the worker's CPU (docs/performance.md, "Hot-path choices").
    What is kept still holds every unacknowledged item, which is all a replay needs."""
    is_unconfirmed = store.is_unconfirmed
    for start, (seq, _) in enumerate(items):
        if is_unconfirmed(session_id, seq):
            return items[start:] + new
    return new
