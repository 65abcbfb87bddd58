"""Warning texts (SPEC §5), in one place and overridable per deployment.

Each text names the rule's pattern, the tool(s) and the count, and says what to do
instead. Templates may use `{tools}`, `{count}` and `{threshold}` only: arguments,
results and error text are untrusted and never appear in a warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from models import RULES, RuleName

DEFAULT_TEMPLATES: Mapping[RuleName, str] = MappingProxyType(
    {
        "repeated_failed_mutation": (
            "Loop warning (repeated_failed_mutation): the same {tools} call has now failed "
            "{count} times in a row with the same error, shown in the preceding tool "
            "result. Do not run it again unchanged: read that error, change the arguments "
            "or the approach, or report the blocker."
        ),
        "repeated_result": (
            "Loop warning (repeated_result): {tools} has returned the same result for the "
            "same call {count} times in a row. Use what it already returned, try different "
            "arguments or another source, or report the blocker."
        ),
        "repeated_read_range": (
            "Loop warning (repeated_read_range): you have read the same range of one "
            "resource with {tools} {count} times in this run of reads. Use the content you "
            "already have, read a different part or source, or report the blocker."
        ),
        "repeated_batch": (
            "Loop warning (repeated_batch): you have issued the same batch of tool calls "
            "({tools}) {count} times in a row. Change the calls or their arguments, use the "
            "results you already have, or report the blocker."
        ),
        "repeated_call_in_turn": (
            "Loop warning (repeated_call_in_turn): your last message made the same {tools} "
            "call {count} times at once. One call gives the same answer; use its result, "
            "change the arguments, or report the blocker."
        ),
        "repeated_cycle": (
            "Loop warning (repeated_cycle): the same sequence of tool steps ({tools}) has "
            "now run {count} times with the same results each time. Break the cycle: use "
            "what these steps already returned, try a different approach, or report the "
            "blocker."
        ),
    }
)

_ALLOWED_FIELDS = ("{tools}", "{count}", "{threshold}")
# Tool names come from the runtime, but keep them inert in a prompt all the same.
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.:/-]")
_MAX_NAME_CHARS = 64


def display_name(tool_name: str) -> str:
    """A tool name as a warning shows it: safe characters only, bounded length."""
    return _UNSAFE_NAME_CHARS.sub("?", tool_name)[:_MAX_NAME_CHARS] or "?"


@dataclass(frozen=True, slots=True)
class WarningTexts:
    """The message templates, one per rule."""

    templates: Mapping[RuleName, str] = field(default_factory=lambda: DEFAULT_TEMPLATES)

    def __post_init__(self) -> None:
        missing = [rule for rule in RULES if rule not in self.templates]
        if missing:
            raise ValueError(f"warning texts: no template for rule {missing[0]!r}")
        for rule, template in self.templates.items():
            try:
                template.format(tools="t", count=1, threshold=1)
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(
                    f"warning texts: template for {rule!r} may only use "
                    f"{', '.join(_ALLOWED_FIELDS)} ({exc})"
                ) from None

    def render(
        self, rule: RuleName, tool_names: tuple[str, ...], count: int, threshold: int
    ) -> str:
        """The message for one warning."""
        tools = ", ".join(f"`{display_name(name)}`" for name in tool_names)
        # a deployment's override may predate the extended rules: they keep their default
        template = self.templates.get(rule) or DEFAULT_TEMPLATES[rule]
        return template.format(tools=tools, count=count, threshold=threshold)


DEFAULT_TEXTS = WarningTexts()
