"""Verdicts (docs/contract.md §5): one per processed event on `loop-verdicts`; warnings also on
`loop-warnings`."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import to_json as _json_value

RuleName = Literal[
    "repeated_failed_mutation",
    "repeated_result",
    "repeated_read_range",
    "repeated_batch",
    "repeated_call_in_turn",
    "repeated_cycle",
    "repeated_error",
    "recurring_result",
    "repeated_call",
    "repeated_message",
    "repeated_condensation",
]
RULES: tuple[RuleName, ...] = (
    "repeated_failed_mutation",
    "repeated_result",
    "repeated_read_range",
    "repeated_batch",
)
"""The seed's rules in evaluation order (docs/contract.md §4): the first that matches gives
the warning."""
ALL_RULES: tuple[RuleName, ...] = (
    *RULES,
    "repeated_call_in_turn",
    "repeated_cycle",
    "repeated_error",
    "recurring_result",
    "repeated_call",
    "repeated_message",
    "repeated_condensation",
)
"""Every rule in evaluation order (docs/contract.md §9.1); a profile enables a subset."""


class LoopWarning(BaseModel):
    """What is repeating, how often, and what to do instead."""

    model_config = ConfigDict(frozen=True)

    rule: RuleName
    """The rule that matched."""
    tool_names: tuple[str, ...]
    """The tool(s) involved, sorted."""
    count: int = Field(ge=1)
    """How many repetitions the rule counted."""
    threshold: int = Field(ge=1)
    """The threshold in force for this rule."""
    message: str
    """Text for the next model prompt; never quotes arguments, results or errors."""
    level: int | None = Field(None, ge=1, le=3, exclude_if=lambda level: level is None)
    """Escalation (contract §9.13, with `escalation` on): 1 warn, 2 insist, 3 stop
    advised, by how many model calls saw this loop's warning without a change. Absent
    (not null) without escalation, so seed verdicts keep §5's bytes."""


class PolicyRef(BaseModel):
    """Which policy record judged a verdict (contract §9.8)."""

    model_config = ConfigDict(frozen=True)

    key: str
    """The record's key in `loopwatch-config`: an agent id, or `*` for the fleet default."""
    version: int = Field(ge=1)
    """The record's `version`."""


class LoopVerdict(BaseModel):
    """The outcome of evaluating the rules after one event."""

    model_config = ConfigDict(frozen=True)

    v: Literal[1] = 1
    """Schema version."""
    type: Literal["loop_verdict"] = "loop_verdict"
    """Discriminator."""
    session_id: str
    """The session of the event."""
    seq: int
    """The `seq` of the event; (session_id, seq) identifies the verdict."""
    agent_id: str | None
    """The event's agent id."""
    event_ts: AwareDatetime
    """The event's `ts`."""
    evaluated_at: AwareDatetime
    """When the verdict was made (the worker's clock; the event time in `scan`)."""
    warning: LoopWarning | None
    """The warning for the next prompt, or null."""
    policy: PolicyRef | None = Field(None, exclude_if=lambda ref: ref is None)
    """The policy record that judged the event (contract §9.8); absent (not null) when the
    worker's built-in policy did, so seed verdicts keep docs/contract.md §5's bytes."""
    state_reset: bool = Field(False, exclude_if=lambda reset: not reset)
    """The session's state was dropped as idle just before this event (contract 1.2,
    §8.5): the event was judged as the first of a fresh session. Absent (not false)
    otherwise, so verdicts keep their bytes and older readers ignore it."""

    def to_json(self) -> bytes:
        """The wire form: compact JSON, UTF-8."""
        if self.warning is None and self.policy is None and not self.state_reset:
            # Most verdicts: the serializer's bytes, with its own encoder for each value
            # that varies, put in the fixed frame: cheaper than the serializer, once per
            # event (tests/unit/test_verdict_bytes.py holds the two equal).
            event_ts = _json_value(self.event_ts)
            evaluated_at = (
                event_ts if self.evaluated_at is self.event_ts else _json_value(self.evaluated_at)
            )
            return _NO_WARNING_FRAME % (
                _json_value(self.session_id),
                self.seq,
                _json_value(self.agent_id),
                event_ts,
                evaluated_at,
            )
        # model_dump_json() with its defaults, without its str round trip
        return LoopVerdict.__pydantic_serializer__.to_json(self)


_NO_WARNING_FRAME = (
    b'{"v":1,"type":"loop_verdict","session_id":%b,"seq":%d,"agent_id":%b,'
    b'"event_ts":%b,"evaluated_at":%b,"warning":null}'
)


VERDICT_ADAPTER: TypeAdapter[LoopVerdict] = TypeAdapter(LoopVerdict)
