"""Warning texts (docs/contract.md §5): each rule's default text, overridable per deployment.

The defaults live beside each rule (`streams.detector.rules`). Each text names the
rule's pattern, the tool(s) and the count, and says what to do instead. Templates may
use `{tools}`, `{count}` and `{threshold}` only: arguments, results and error text are
untrusted and never appear in a warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType

from loopwatch.models import RULES, RuleName
from loopwatch.streams.detector.rules import ALL_RULES

DEFAULT_TEMPLATES: Mapping[RuleName, str] = MappingProxyType(
    {rule.name: rule.template for rule in ALL_RULES.rules}
)
"""Each rule's own text (its module's `template`)."""

_ALLOWED_FIELDS = ("{tools}", "{count}", "{threshold}")
# Tool names come from the runtime, but keep them inert in a prompt all the same.
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.:/-]")
_MAX_NAME_CHARS = 64


def display_name(tool_name: str) -> str:
    """A tool name as a warning shows it: safe characters only, bounded length."""
    return _UNSAFE_NAME_CHARS.sub("?", tool_name)[:_MAX_NAME_CHARS] or "?"


@lru_cache(maxsize=1024)
def _tools_text(tool_names: tuple[str, ...]) -> str:
    """The tools as a warning names them, remembered per tuple of names (a loop's
    warnings name the same tools each time; a pure function of the names)."""
    return ", ".join(f"`{display_name(name)}`" for name in tool_names)


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
        # a hashable tuple (what the rules give) is remembered; anything else is not
        tools = (
            _tools_text(tool_names)
            if type(tool_names) is tuple
            else ", ".join(f"`{display_name(name)}`" for name in tool_names)
        )
        # a deployment's override may predate the extended rules: they keep their default
        template = self.templates.get(rule) or DEFAULT_TEMPLATES[rule]
        return template.format(tools=tools, count=count, threshold=threshold)


DEFAULT_TEXTS = WarningTexts()
