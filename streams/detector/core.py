"""`observe`: the pure, incremental detector (docs/contract.md §4).

Each event updates the recent calls and the trackers' parts (`streams.detector.rules`),
then the rules are read off them in order. Work per event is O(size of the event),
independent of the session's length.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from loopwatch.models import (
    AgentEvent,
    AssistantMessage,
    DetectionConfig,
    LoopEpisode,
    LoopVerdict,
    PolicyRef,
    RuleName,
    ToolResult,
    call_fingerprint,
    result_fingerprint,
)
from loopwatch.models.volatile import ResultCleaner
from loopwatch.streams.detector.episodes import OpenEpisode, pending_calls, track
from loopwatch.streams.detector.matching import checked_hit, first_match
from loopwatch.streams.detector.rules import ALL_RULES, RuleSet
from loopwatch.streams.detector.rules.base import Match
from loopwatch.streams.detector.state import MAX_REMEMBERED_CALLS, SessionState
from loopwatch.streams.detector.texts import DEFAULT_TEXTS, WarningTexts
from loopwatch.streams.detector.tools import fingerprint_digest, id_digest, short_digest
from loopwatch.streams.detector.warning import warning_of

# LoopVerdict(...) with the same validation (and fields set) minus BaseModel.__init__'s
# own overhead, which runs on every event (docs/performance.md, "Hot-path choices").
_validate_verdict = LoopVerdict.__pydantic_validator__.validate_python


def observe(
    state: SessionState | None,
    event: AgentEvent,
    config: DetectionConfig,
    *,
    evaluated_at: datetime | None = None,
    texts: WarningTexts = DEFAULT_TEXTS,
    rules: RuleSet | None = None,
    policy: PolicyRef | None = None,
) -> tuple[SessionState | None, LoopVerdict | None]:
    """Apply one event to a session's state and evaluate the rules.

    Returns the new state (None after `session_end`: the state is dropped) and the
    event's verdict. An event whose `seq` is not above the last processed one is a
    duplicate or out of order: the state comes back unchanged and there is no verdict.
    `evaluated_at` defaults to the event's own time (the core reads no clock).
    `config` chooses which rules judge (its profile and switches, docs/contract.md §9),
    and the state keeps only what those rules read: a state of the `ALL_RULES` family
    switches to `ALL_RULES.kept_for(config)` at this event (a tracker new to it starts
    empty, one no longer read is dropped, §9.1). `rules` instead fixes the set: it
    applies to a new session, and an existing one keeps its state's rules.
    `policy`: the policy record `config` comes from, named in the verdict (§9.8).
    The input state is never modified. `observe_episodes` also returns loop episodes.
    """
    observation = observe_episodes(
        state, event, config, evaluated_at=evaluated_at, texts=texts, rules=rules, policy=policy
    )
    return observation.state, observation.verdict


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class Observation:
    """What one event did: the new state, its verdict, and its loop episodes."""

    state: SessionState | None
    """None after `session_end` (the state is dropped)."""
    verdict: LoopVerdict | None
    """None for a duplicate or out-of-order event (nothing else changed then)."""
    opened: tuple[OpenEpisode, ...] = ()
    """Loop episodes this event's warning started."""
    closed: tuple[LoopEpisode, ...] = ()
    """Loop episodes this event ended (broken or session_ended), in rule order."""


def observe_episodes(
    state: SessionState | None,
    event: AgentEvent,
    config: DetectionConfig,
    *,
    evaluated_at: datetime | None = None,
    texts: WarningTexts = DEFAULT_TEXTS,
    rules: RuleSet | None = None,
    policy: PolicyRef | None = None,
) -> Observation:
    """`observe`, with the loop episodes the event started and ended (contract §8)."""
    if state is not None and event.seq <= state.last_seq:
        return Observation(state, None)
    if rules is None:
        rules = ALL_RULES.kept_for(config)
        if state is not None and state.rules is not rules and state.rules.family is ALL_RULES:
            state = state.keeping(rules)
    mode = config.result_mode
    if state is not None and state.mode != mode:
        state = state.comparing(mode)
    new = advance(state, event, rules, config.result_cleaner, mode)
    match = first_match(new, config)
    warning = None if match is None else warning_of(match, texts)
    shown, level = warning, 1
    if match is not None and (config.escalates or config.warn_once):
        level, rises = _escalation(new, match, event, config)
        if config.escalates:
            shown = warning_of(match, texts, level)
        elif rises and level > 1:  # no levels shown: only a loop's first warning rises
            rises = False
        if config.warn_once and not rises:
            shown = None
    verdict: LoopVerdict = _validate_verdict(
        {
            "session_id": event.session_id,
            "seq": event.seq,
            "agent_id": event.agent_id,
            "event_ts": event.ts,
            "evaluated_at": evaluated_at or event.ts,
            "warning": shown,
            "policy": policy,
        }
    )
    new.step_pending, completed = pending_calls(new.step_pending, event)
    ended = event.type == "session_end"
    if warning is None and (
        not new.episodes or (not completed and not ended and event.type != "assistant_message")
    ):
        # `track` would change nothing (most events): no closure, no call
        return Observation(None if ended else new, verdict)

    def subject_of(name: RuleName) -> str | None:
        if match is not None and name == match.rule.name:  # the warned rule: its hit
            return _subject_digest(match.hit.subject)
        return episode_subject(new, config, name)

    changes = track(
        new.episodes,
        event,
        warning,
        completed_step=completed,
        subject_of=subject_of,
        rule_order=new.rules.names,
        level=level,
    )
    if changes is None:
        return Observation(None if ended else new, verdict)
    new.episodes = changes.open
    new.loops += len(changes.opened)
    return Observation(None if ended else new, verdict, changes.opened, changes.closed)


def _escalation(
    state: SessionState, match: Match, event: AgentEvent, config: DetectionConfig
) -> tuple[int, bool]:
    """The escalation level of this match's warning (contract §9.13) and whether it is
    the loop's first warning or a higher level than its warnings had: 1 + one level per
    `escalate_after` model calls that saw the loop's warning, at most 3."""
    name, subject = match.rule.name, _subject_digest(match.hit.subject)
    for episode in state.episodes:
        if episode.rule == name and episode.subject == subject:
            calls = episode.calls + (event.type == "assistant_message")
            level = 1 + min(2, calls // config.escalate_after)
            return level, level > episode.level
    return 1, True


def expire_episodes(state: SessionState, session_id: str) -> tuple[LoopEpisode, ...]:
    """The open episodes of a state the worker drops as idle, closed `expired`."""
    return tuple(episode.expire(session_id) for episode in state.episodes)


_SUBJECT_CHARS = 16  # 64 bits: tells a session's loops apart, names no content


@lru_cache(maxsize=4096)
def _subject_digest(subject: str) -> str:
    """A subject as an episode records it, remembered for the 4,096 newest: a loop's
    subject is digested again at each of its warnings. Pure: the cache changes the cost
    only."""
    return short_digest(subject)[:_SUBJECT_CHARS]


def episode_subject(state: SessionState, config: DetectionConfig, name: RuleName) -> str | None:
    """The subject of rule `name` if it fires in this state (None: it does not), as an
    episode records it: 16 hex digits of SHA-256 of the rule's `Hit.subject`. Whether an
    earlier rule gave the event's warning instead does not matter."""
    parts = state.parts
    for check, index, rule in state.rules.for_config(config):
        if rule.name == name:
            hit = checked_hit(rule, check, parts[index], config)
            return None if hit is None else _subject_digest(hit.subject)
    return None


def advance(
    state: SessionState | None,
    event: AgentEvent,
    rules: RuleSet = ALL_RULES,
    cleaner: ResultCleaner | None = None,
    mode: str = "",
) -> SessionState:
    """The state after `event` (the caller has checked its seq); `state` is not modified.
    `cleaner`: results are compared by their loose fingerprint (contract §9.9), and a new
    state records `mode` (`DetectionConfig.result_mode`)."""
    if state is None:
        new = SessionState(event.seq, event.ts, {}, rules.empty_parts(), rules, mode=mode)
    else:
        rules = state.rules
        new = SessionState(
            event.seq,
            event.ts,
            state.calls,
            state.parts.copy(),
            rules,
            state.step_pending,
            state.episodes,
            state.loops,
            state.mode,
        )
    parts = new.parts
    # Dispatch on the discriminator: a str compare is cheaper than isinstance on a
    # pydantic model, tested up to four times per event.
    if event.type == "tool_result":
        signature = _signature(new, event, cleaner)
        for index, on_result in rules.on_result:
            parts[index] = on_result(parts[index], event, signature)
    elif event.type == "assistant_message":
        if event.tool_calls:
            digests = _remember_calls(new, event)
            for index, on_tool_step in rules.on_tool_step:
                parts[index] = on_tool_step(parts[index], event, digests)
        else:
            for index, on_text_step in rules.on_text_step:
                parts[index] = on_text_step(parts[index])
            for index, on_text in rules.on_text:
                parts[index] = on_text(parts[index], event)
    elif event.type in {"user_message", "system_message"}:
        for index, on_boundary in rules.on_boundary:
            parts[index] = on_boundary(parts[index])
        if event.type == "user_message":
            for index, on_user_message in rules.on_user_message:
                parts[index] = on_user_message(parts[index])
    elif event.type == "context_condensed":
        for index, on_condensed in rules.on_condensed:
            parts[index] = on_condensed(parts[index])
    return new


def _remember_calls(state: SessionState, event: AssistantMessage) -> list[str]:
    """Note each call's id → fingerprint digest; return the digests in call order."""
    digests = []
    calls = dict(state.calls)
    for call in event.tool_calls:
        digest = fingerprint_digest(call.fingerprint or call_fingerprint(call.name, call.arguments))
        digests.append(digest)
        key = id_digest(call.id)
        calls.pop(key, None)  # re-inserted at the end: the newest call with an id wins
        calls[key] = digest
    while len(calls) > MAX_REMEMBERED_CALLS:
        del calls[next(iter(calls))]
    state.calls = calls
    return digests


def _signature(state: SessionState, event: ToolResult, cleaner: ResultCleaner | None) -> str | None:
    """`<call digest>:<result digest>`; None when the call cannot be resolved."""
    call: str | None
    if event.call_fingerprint is not None:
        call = fingerprint_digest(event.call_fingerprint)
    else:
        call = state.calls.get(id_digest(event.call_id))
    if call is None:
        return None
    if event.result_fingerprint is not None:
        result = fingerprint_digest(event.result_fingerprint)
    elif cleaner is None:
        result = fingerprint_digest(result_fingerprint(event.tool_name, event.result, event.error))
    else:
        result = fingerprint_digest(cleaner.fingerprint(event.tool_name, event.result, event.error))
    return f"{call}:{result}"
