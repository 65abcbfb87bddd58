"""The rule protocol: a rule is a tracker (its per-session state) plus a check and a text.

A `Tracker` owns one part of the session state: its empty value, how each kind of event
updates it, and its part of the snapshot. Parts are immutable values: a hook returns the
part unchanged (the same object) or a new one, never mutates it. A hook a tracker does
not override is never called (the core only calls the hooks a tracker defines).

A `Rule` reads one tracker's part and says whether it matches (`check` → `Hit`); its
`template` is its default warning text (`streams.detector.texts`). Two rules may share
a tracker (rules 1 and 2 read the same run of results).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from loopwatch.models import AssistantMessage, DetectionConfig, RuleName, ToolResult

Part = TypeVar("Part")


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class Hit:
    """What a matching rule reports."""

    tool_names: tuple[str, ...]
    count: int
    threshold: int
    subject: str
    """A stable digest of what repeated: the same loop gives the same subject at every
    repetition. Rules 1-2: the result signature (`<call digest>:<result digest>`, 65
    hex chars and a colon); rule 3: the read target's digest; rule 4: the batch's
    digest (32 hex chars each). Never raw content."""


class Tracker(Generic[Part]):
    """One part of the per-session state, kept under `key` in the snapshot."""

    key: str
    reads_signatures: bool = False
    """Its part depends on how results are compared (docs/contract.md §9.9): it starts
    again when that changes."""

    def empty(self) -> Part:
        raise NotImplementedError

    def on_boundary(self, part: Part) -> Part:
        """A user or system message."""
        return part

    def on_user_message(self, part: Part) -> Part:
        """A user message, after `on_boundary` (new intent: a tracker that treats it
        unlike a system message)."""
        return part

    def on_text_step(self, part: Part) -> Part:
        """An assistant message without tool calls."""
        return part

    def on_text(self, part: Part, event: AssistantMessage) -> Part:
        """A text step, after `on_text_step`, with its event (for a tracker that reads
        its text's digest)."""
        return part

    def on_condensed(self, part: Part) -> Part:
        """A `context_condensed` event (the platform condensed the history)."""
        return part

    def on_tool_step(self, part: Part, event: AssistantMessage, call_digests: list[str]) -> Part:
        """An assistant message with tool calls; `call_digests`: the digest of each
        call's fingerprint, in call order."""
        return part

    def on_result(self, part: Part, event: ToolResult, signature: str | None) -> Part:
        """A tool result; `signature`: `<call digest>:<result digest>`, or None when its
        call cannot be resolved (it then matches nothing, docs/contract.md §3)."""
        return part

    def to_snapshot(self, part: Part, *, copy: bool) -> Any:
        """A JSON-able value (`copy=False`: may share the part's containers)."""
        raise NotImplementedError

    def from_snapshot(self, data: Any) -> Part:
        raise NotImplementedError

    def handles(self, hook: str) -> bool:
        """Whether this tracker overrides `hook` (the core skips the others)."""
        return getattr(type(self), hook) is not getattr(Tracker, hook)


class Rule(Generic[Part]):
    """One rule of the evaluation order: its name on the wire, its tracker, its check."""

    name: RuleName
    tracker: Tracker[Part]
    template: str
    """The default warning text: may use `{tools}`, `{count}` and `{threshold}` only."""
    applies_policy: bool = False
    """The check itself applies exempt tools and per-tool thresholds (docs/contract.md
    §9.6, through `config.threshold_for`); for the others the core does."""

    def check(self, part: Part, config: DetectionConfig) -> Hit | None:
        raise NotImplementedError


@dataclass(slots=True)  # never mutated; not frozen: built per event (docs/performance.md)
class Match:
    """The first rule that matched, and what it reports (`hit.subject` says what
    repeated: loop episodes key on it)."""

    rule: Rule[Any]
    hit: Hit
