"""`loopwatch.scan(...)`: what `loopwatch scan` computes, in process, for notebooks and
tests (docs/scan.md, "In process"). No broker, no files needed."""

from __future__ import annotations

import html
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from loopwatch.models import DetectionConfig, LoopEpisode, LoopVerdict
from loopwatch.streams.scan.recorded import (
    EVENTS_FORMAT,
    INPUT_FORMATS,
    Recorded,
    Skipped,
    as_events,
    read_recorded,
)
from loopwatch.streams.scan.scanner import DEFAULT_IDLE_TTL, Scanner, ScanStats


@dataclass
class ScanResult:
    """The verdicts (one per processed event, input order) and loop episodes (as they
    closed, then those still open at the end as `expired`) of one scan."""

    verdicts: list[LoopVerdict]
    episodes: list[LoopEpisode]
    stats: ScanStats
    skipped: list[Skipped] = field(default_factory=list)
    """Input items that were no event, and why (`scan` reports them on stderr)."""

    @property
    def warnings(self) -> list[LoopVerdict]:
        """The verdicts that carry a warning."""
        return [verdict for verdict in self.verdicts if verdict.warning is not None]

    def warnings_by_rule(self) -> dict[str, int]:
        return dict(sorted(self.stats.warnings.items()))

    def __repr__(self) -> str:
        rules = ", ".join(f"{rule}={n}" for rule, n in self.warnings_by_rule().items())
        return (
            f"<ScanResult: {_count(len(self.stats.sessions), 'session')}, "
            f"{_count(self.stats.events, 'event')}, "
            f"{_count(len(self.warnings), 'warning')} ({rules or 'none'}), "
            f"{_count(len(self.episodes), 'episode')}, {len(self.skipped)} skipped>"
        )

    def _repr_html_(self) -> str:
        """Jupyter's view: the totals, and the warnings by rule with their sessions."""
        sessions_by_rule: dict[str, set[str]] = {}
        for verdict in self.warnings:
            assert verdict.warning is not None
            sessions_by_rule.setdefault(verdict.warning.rule, set()).add(verdict.session_id)
        rows = (
            "".join(
                f"<tr><td>{html.escape(rule)}</td><td>{n}</td>"
                f"<td>{len(sessions_by_rule.get(rule, ()))}</td></tr>"
                for rule, n in self.warnings_by_rule().items()
            )
            or '<tr><td colspan="3">no warnings</td></tr>'
        )
        outcomes = Counter(episode.outcome for episode in self.episodes)
        episodes = ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items())) or "none"
        return (
            "<div><p><b>loopwatch scan</b>: "
            f"{_count(len(self.stats.sessions), 'session')}, "
            f"{_count(self.stats.events, 'event')}, "
            f"{_count(len(self.warnings), 'warning')}; episodes: {html.escape(episodes)}; "
            f"{len(self.skipped)} skipped</p>"
            "<table><thead><tr><th>rule</th><th>warnings</th><th>sessions</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></div>"
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def scan(
    messages_or_events: Iterable[Any] | os.PathLike[str],
    *,
    format: str = EVENTS_FORMAT,  # (the name `loopwatch scan --format` uses)
    profile: str | None = None,
    config: DetectionConfig | None = None,
    idle_ttl: float | None = DEFAULT_IDLE_TTL,
) -> ScanResult:
    """Judge recorded sessions as `loopwatch scan` does and return what it found.

    `messages_or_events`: events (`AgentEvent`s, event dicts or JSON lines) with `format`
    "events"; with a transcript format ("openai", "anthropic", "responses", ...) the
    messages of one conversation, or a list of conversations; or a path (`pathlib.Path`)
    to a file `loopwatch scan` would read (`.gz` too). `profile` ("seed", the default, or
    "extended") or a whole `config`; `idle_ttl`: the worker's
    `LOOPWATCH_SESSION_TTL_SECONDS` (docs/contract.md §8.5; None: never)."""
    if format not in INPUT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(INPUT_FORMATS)}, got {format!r}")
    if config is not None and profile is not None:
        raise ValueError("give profile or config, not both")
    if config is None:
        config = DetectionConfig() if profile is None else DetectionConfig(profile=profile)
    recorded: Recorded
    if isinstance(messages_or_events, os.PathLike):
        recorded = read_recorded([os.fspath(messages_or_events)], format)
    else:
        recorded = as_events(messages_or_events, format)
    scanner = Scanner(config, idle_ttl=idle_ttl)
    verdicts: list[LoopVerdict] = []
    episodes: list[LoopEpisode] = []
    for event in recorded.events:
        verdict = scanner.judge(event)
        episodes.extend(scanner.closed_episodes)
        if verdict is not None:
            verdicts.append(verdict)
    episodes.extend(scanner.open_episodes())
    return ScanResult(verdicts, episodes, scanner.stats, recorded.skipped)
