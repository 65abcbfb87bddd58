"""The tests' reference readings of the spec, re-scanning the history at each event: the
§3-§4 warnings (`expected_warning`, `ReplaySession`: ops/bench/rescan.py, which the scan
bench shares) and the §8 loop episodes (`EpisodeReplay`, here).

Written from the spec alone, without reading the core.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loopwatch.models import AgentEvent, AssistantMessage, DetectionConfig, ToolResult
from ops.bench.rescan import (
    ExpectedWarning,
    ReplaySession,
    batch_of,
    expected_warning,
    fingerprint_of_call,
    is_boundary,
    is_mutating_tool,
    is_text_step,
    is_tool_step,
    read_range,
    read_resource,
    result_run,
    rule_repeated_batch,
    rule_repeated_failed_mutation,
    rule_repeated_read_range,
    rule_repeated_result,
    signatures,
    tool_chain,
)

__all__ = [  # what the tests use as `reference.<name>`
    "EpisodeReplay",
    "ExpectedEpisode",
    "ExpectedWarning",
    "ReplaySession",
    "batch_of",
    "completes_tool_step",
    "expected_warning",
    "fingerprint_of_call",
    "is_boundary",
    "is_mutating_tool",
    "is_text_step",
    "is_tool_step",
    "read_range",
    "read_resource",
    "result_run",
    "rule_subject",
    "signatures",
    "tool_chain",
]


# --- loop episodes (docs/contract.md §8), by re-scanning the history -----------------


def rule_subject(history: Sequence[AgentEvent], config: DetectionConfig, rule: str) -> Any:
    """What `rule` fires on after the last event of `history` (None when it does not
    fire), compared by equality only: the newest result's full signature for rules 1 and
    2, the read target for rule 3, the sorted batch for rule 4. Independent of which rule
    gave the event's warning."""
    if rule in ("repeated_failed_mutation", "repeated_result"):
        check = (
            rule_repeated_failed_mutation
            if rule == "repeated_failed_mutation"
            else rule_repeated_result
        )
        if check(history, config) is None:
            return None
        return ("signature", signatures(history)[_newest_result_index(history)])
    if rule == "repeated_read_range":
        if rule_repeated_read_range(history, config) is None:
            return None
        return ("target", read_resource(tool_chain(history)[0].tool_calls[0]))
    if rule_repeated_batch(history, config) is None:
        return None
    steps = [event for event in history if isinstance(event, AssistantMessage)]
    return ("batch", tuple(batch_of(steps[-1])))


def _newest_result_index(history: Sequence[AgentEvent]) -> int:
    return max(i for i, event in enumerate(history) if isinstance(event, ToolResult))


def completes_tool_step(history: Sequence[AgentEvent]) -> bool:
    """Whether the last event completes a tool step: it is a tool result, the newest
    assistant message before it is a tool step, and with it (not before it) every
    distinct call id of that step has a result with that id after the step.

    READING: the state caps awaited ids at 64 per step; generated steps stay far below.
    """
    last = history[-1]
    if not isinstance(last, ToolResult):
        return False
    steps = [i for i, event in enumerate(history) if isinstance(event, AssistantMessage)]
    if not steps:
        return False
    step = history[steps[-1]]
    assert isinstance(step, AssistantMessage)
    ids = {call.id for call in step.tool_calls}
    if not ids:
        return False
    answers = [e.call_id for e in history[steps[-1] + 1 :] if isinstance(e, ToolResult)]
    return ids <= set(answers) and not ids <= set(answers[:-1])


@dataclass
class ExpectedEpisode:
    rule: str
    subject: Any
    tool_names: tuple[str, ...]
    agent_id: str | None
    first_seq: int
    started_at: Any
    last_seq: int
    ended_at: Any
    peak_count: int
    warnings: int
    outcome: str = "open"
    warned_calls: int = 0
    """§8.3: the assistant messages after its first warned event, up to its end."""


RULE_NAMES = (
    "repeated_failed_mutation",
    "repeated_result",
    "repeated_read_range",
    "repeated_batch",
)


class EpisodeReplay:
    """Loop episodes of one session, replaying the history at every event: `feed`
    returns the episodes the event closed (rule order; a displaced one first)."""

    def __init__(self, config: DetectionConfig) -> None:
        self.sessions = ReplaySession(config)
        self.open: dict[str, ExpectedEpisode] = {}

    def feed(self, event: AgentEvent) -> list[ExpectedEpisode]:
        history = [*self.sessions.history, event]  # before feed drops it at session_end
        processed, warning = self.sessions.feed(event)
        if not processed:
            return []
        config = self.sessions.config
        closed: list[ExpectedEpisode] = []

        def close(episode: ExpectedEpisode, outcome: str) -> None:
            episode.outcome = outcome
            episode.last_seq, episode.ended_at = event.seq, event.ts
            if event.agent_id is not None:
                episode.agent_id = event.agent_id
            closed.append(episode)

        if event.type == "assistant_message":  # a model call that saw the open warnings
            for episode in self.open.values():
                episode.warned_calls += 1
        if warning is not None:
            subject = rule_subject(history, config, warning.rule)
            assert subject is not None
            current = self.open.get(warning.rule)
            if current is not None and current.subject == subject:
                current.warnings += 1
                current.peak_count = max(current.peak_count, warning.count)
                current.last_seq, current.ended_at = event.seq, event.ts
                if event.agent_id is not None:
                    current.agent_id = event.agent_id
            else:
                if current is not None:
                    close(current, "broken")
                self.open[warning.rule] = ExpectedEpisode(
                    warning.rule, subject, warning.tool_names, event.agent_id,
                    event.seq, event.ts, event.seq, event.ts, warning.count, 1,
                )  # fmt: skip
        if completes_tool_step(history):
            for rule in list(self.open):
                if rule_subject(history, config, rule) != self.open[rule].subject:
                    close(self.open.pop(rule), "broken")
        if event.type == "session_end":
            for rule in list(self.open):
                close(self.open.pop(rule), "session_ended")
        return sorted(closed, key=lambda e: (RULE_NAMES.index(e.rule), e.first_seq))

    def expire(self) -> list[ExpectedEpisode]:
        """The open episodes, closed as expired: each ends at its last warning."""
        out = []
        for rule in RULE_NAMES:
            if rule in self.open:
                episode = self.open.pop(rule)
                episode.outcome = "expired"
                out.append(episode)
        return out
