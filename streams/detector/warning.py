"""The warning a verdict carries for a rule's match (docs/contract.md §5), in the
configured texts; default-text warnings are cached, since the same one comes back in
every session stuck the same way."""

from __future__ import annotations

from functools import lru_cache

from loopwatch.models import LoopWarning, RuleName
from loopwatch.streams.detector.rules.base import Match
from loopwatch.streams.detector.texts import DEFAULT_TEXTS, WarningTexts

_validate_warning = LoopWarning.__pydantic_validator__.validate_python


LEVEL_TEXTS = {
    2: " It was shown before and the loop goes on: do something different now.",
    3: (
        " It has been shown several times and the loop goes on: stop, and report the "
        "blocker. The run may be stopped."
    ),
}
"""Appended to the message at escalation levels 2 and 3 (docs/contract.md §9.13)."""


def warning_of(
    match: Match, texts: WarningTexts = DEFAULT_TEXTS, level: int | None = None
) -> LoopWarning:
    """The warning a verdict carries for this match (docs/contract.md §5), with its
    escalation `level` when given (§9.13)."""
    if level is not None:
        plain = warning_of(match, texts)
        return _leveled(plain, level)
    hit = match.hit
    if texts is DEFAULT_TEXTS and type(hit.tool_names) is tuple:
        try:
            return _default_warning(match.rule.name, hit.tool_names, hit.count, hit.threshold)
        except TypeError:  # an unhashable name: rendered below, failing as it did before
            pass
    return _warning(texts, match.rule.name, hit.tool_names, hit.count, hit.threshold)


@lru_cache(maxsize=1024)
def _leveled(plain: LoopWarning, level: int) -> LoopWarning:
    leveled: LoopWarning = _validate_warning(
        {
            "rule": plain.rule,
            "tool_names": plain.tool_names,
            "count": plain.count,
            "threshold": plain.threshold,
            "message": plain.message + LEVEL_TEXTS.get(level, ""),
            "level": level,
        }
    )
    return leveled


@lru_cache(maxsize=4096)
def _default_warning(
    name: RuleName, tool_names: tuple[str, ...], count: int, threshold: int
) -> LoopWarning:
    """A warning in the default texts, remembered for the 4,096 newest: the same
    (rule, tools, count, threshold) comes back in every session stuck the same way, and
    rendering and validating it is costly. A frozen model, so sharing it is safe; pure,
    so the cache changes the cost only."""
    return _warning(DEFAULT_TEXTS, name, tool_names, count, threshold)


def _warning(
    texts: WarningTexts, name: RuleName, tool_names: tuple[str, ...], count: int, threshold: int
) -> LoopWarning:
    warning: LoopWarning = _validate_warning(
        {
            "rule": name,
            "tool_names": tool_names,
            "count": count,
            "threshold": threshold,
            "message": texts.render(name, tool_names, count, threshold),
        }
    )
    return warning
