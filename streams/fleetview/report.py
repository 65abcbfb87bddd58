"""The offline loop report over recorded sessions: the detector core (streams.scan.scanner) over
event files, the loops it finds tallied by rule, agent, tool and session. Names and counts
only: no arguments, results or texts reach the report."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwatch.models import (
    RULES,
    AgentEvent,
    DetectionConfig,
    LoopEpisode,
    PolicyRef,
    broken_at_first_warning,
)
from loopwatch.streams.fleetview.assets import asset
from loopwatch.streams.scan.inputs import Skipped, open_input, read_events
from loopwatch.streams.scan.scanner import DEFAULT_IDLE_TTL, Scanner
from loopwatch.streams.scan.transcripts import AUTO

TOP = 12
"""Rows of the agent, tool and session charts."""
REPEAT_BUCKETS: tuple[tuple[str, int], ...] = (
    ("2", 2),
    ("3", 3),
    ("4", 4),
    ("5", 5),
    ("6-9", 9),
    ("10-19", 19),
    ("20+", 1 << 62),
)
"""Label and largest peak repeat count of each bar (a count of 1 joins the first bar)."""
POSITION_BUCKETS = 10
"""Where in a session loops start: tenths of the session's events."""
SHOWN_LINE_ERRORS = 5
LISTED_LOOPS = 1000
"""Rows of the drill-down list of loops (the counts above it cover every loop)."""


@dataclass
class SessionTally:
    agent_id: str | None = None
    events: int = 0
    loops: int = 0
    warnings: int = 0


@dataclass
class ReportData:
    """Everything the report shows, from one pass over the files."""

    files: list[str] = field(default_factory=list)
    events: int = 0
    skipped_lines: int = 0
    line_errors: list[str] = field(default_factory=list)
    warnings: Counter[str] = field(default_factory=Counter)
    sessions: dict[str, SessionTally] = field(default_factory=dict)
    loops: list[tuple[LoopEpisode, int]] = field(default_factory=list)
    """Each loop with the index (0-based, in the session's events) of its first warning."""

    def to_json(self) -> dict[str, Any]:
        """The numbers the HTML draws (and the terminal summary reads)."""
        by_agent: Counter[str] = Counter()
        by_tool: Counter[str] = Counter()
        repeats = [0] * len(REPEAT_BUCKETS)
        positions = [0] * POSITION_BUCKETS
        outcomes: Counter[str] = Counter()
        broken_first = 0
        for loop, index in self.loops:
            broken_first += broken_at_first_warning(loop)
            by_agent[loop.agent_id or "(no agent id)"] += 1
            by_tool.update(loop.tool_names)
            repeats[
                next(i for i, (_, top) in enumerate(REPEAT_BUCKETS) if loop.peak_count <= top)
            ] += 1
            length = max(self.sessions[loop.session_id].events, 1)
            positions[min(index * POSITION_BUCKETS // length, POSITION_BUCKETS - 1)] += 1
            outcomes[loop.outcome] += 1
        looping = sorted(
            ((sid, s) for sid, s in self.sessions.items() if s.loops),
            key=lambda item: (-item[1].loops, -item[1].warnings, item[0]),
        )
        by_rule = Counter(loop.rule for loop, _ in self.loops)
        step = 100 // POSITION_BUCKETS
        return {
            "files": self.files,
            "totals": {
                "events": self.events,
                "sessions": len(self.sessions),
                "sessions_with_loops": len(looping),
                "loops": len(self.loops),
                "warnings": sum(self.warnings.values()),
                "skipped_lines": self.skipped_lines,
            },
            "rules": list(RULES),
            "by_rule": {rule: by_rule[rule] for rule in RULES},
            "by_agent": by_agent.most_common(TOP),
            "by_tool": by_tool.most_common(TOP),
            "top_sessions": [
                {
                    "session_id": sid,
                    "agent_id": s.agent_id,
                    "loops": s.loops,
                    "warnings": s.warnings,
                    "events": s.events,
                }
                for sid, s in looping[:TOP]
            ],
            "repeats": {"labels": [label for label, _ in REPEAT_BUCKETS], "counts": repeats},
            "start_position": {
                "labels": [f"{i * step}-{(i + 1) * step}%" for i in range(POSITION_BUCKETS)],
                "counts": positions,
            },
            "outcomes": dict(outcomes),
            "broken_first": {"loops": broken_first, "closed": len(self.loops)},
            "loop_list": [
                {
                    "session_id": loop.session_id,
                    "agent_id": loop.agent_id,
                    "rule": loop.rule,
                    "tool_names": list(loop.tool_names),
                    "first_seq": loop.first_seq,
                    "last_seq": loop.last_seq,
                    "peak_count": loop.peak_count,
                    "warnings": loop.warnings,
                    "outcome": loop.outcome,
                }
                for loop in sorted(
                    (loop for loop, _ in self.loops), key=lambda e: (e.session_id, e.first_seq)
                )[:LISTED_LOOPS]
            ],
        }


def collect(
    paths: Iterable[Path | str],
    config: DetectionConfig,
    *,
    fmt: str = AUTO,
    policy: PolicyRef | None = None,
    idle_ttl: float | None = DEFAULT_IDLE_TTL,
) -> ReportData:
    """Scan every file as `loopwatch scan` reads it (events or transcripts, plain or gzip;
    `-`: standard input), in order, judged by `config` (named `policy` in the verdicts),
    a session's state reset after `idle_ttl` seconds of its own event time (§8.5).

    Raises OSError or EOFError for a file that cannot be read; an invalid line is counted
    and skipped. Sessions are keyed by session id across files, as one stream.
    """
    data = ReportData()
    scanner = Scanner(config, policy=policy, idle_ttl=idle_ttl)
    first_index: dict[tuple[str, str], int] = {}  # (session, rule) of an open loop
    for path in paths:
        name = str(path)
        label = "stdin" if name == "-" else Path(name).name
        data.files.append(label)
        with ExitStack() as stack:
            source = open_input(name, stack)
            for read in read_events(source, fmt, name=name):
                if isinstance(read, Skipped):
                    data.skipped_lines += 1
                    if len(data.line_errors) < SHOWN_LINE_ERRORS:
                        data.line_errors.append(f"{label} line {read.line}: {read.reason}")
                    continue
                for event in read[1]:
                    _judge(data, scanner, event, first_index)
    data.events = scanner.stats.events
    _add(data, scanner.open_episodes(), first_index)
    return data


def _judge(
    data: ReportData, scanner: Scanner, event: AgentEvent, first_index: dict[tuple[str, str], int]
) -> None:
    verdict = scanner.judge(event)
    if verdict is None:
        return
    session = data.sessions.setdefault(event.session_id, SessionTally())
    session.agent_id = event.agent_id or session.agent_id
    # the loops this event closed first: a new loop of the same rule may start here
    _add(data, scanner.closed_episodes, first_index)
    if verdict.warning is not None:
        session.warnings += 1
        data.warnings[verdict.warning.rule] += 1
        first_index.setdefault((event.session_id, verdict.warning.rule), session.events)
    session.events += 1


def _add(
    data: ReportData, closed: Iterable[LoopEpisode], first_index: dict[tuple[str, str], int]
) -> None:
    for loop in closed:
        index = first_index.pop((loop.session_id, loop.rule), 0)
        data.sessions[loop.session_id].loops += 1
        data.loops.append((loop, index))


def summary_lines(numbers: dict[str, Any]) -> list[str]:
    """A short text summary for the terminal."""
    t = numbers["totals"]
    share = t["sessions_with_loops"] / t["sessions"] if t["sessions"] else 0.0
    files = len(numbers["files"])
    lines = [
        f"{_n(t['events'], 'event')}, {_n(t['sessions'], 'session')} from "
        f"{_n(files, 'file')}: {_n(t['loops'], 'loop')} in "
        f"{_n(t['sessions_with_loops'], 'session')} "
        f"({'<1%' if 0 < share < 0.005 else f'{share:.0%}'}), {_n(t['warnings'], 'warning')}",
    ]
    if t["loops"]:
        rules = ", ".join(f"{rule} {n}" for rule, n in numbers["by_rule"].items() if n)
        lines.append(f"by rule: {rules}")
        lines.append("top agents: " + _top(numbers["by_agent"]))
        lines.append("top tools: " + _top(numbers["by_tool"]))
        worst = numbers["top_sessions"][0]
        lines.append(
            f"most loops: {worst['session_id']} ({_n(worst['loops'], 'loop')}, "
            f"{_n(worst['warnings'], 'warning')} in {_n(worst['events'], 'event')})"
        )
    first = numbers.get("broken_first")
    if first and first["closed"]:
        lines.append(
            f"broken after the first warning: {first['loops'] / first['closed']:.0%} "
            f"({first['loops']} of {_n(first['closed'], 'loop')} changed course at the first "
            "model call that saw it)"
        )
    if t["skipped_lines"]:
        lines.append(f"{_n(t['skipped_lines'], 'line')} skipped (not valid events)")
    return lines


def _n(count: int, noun: str) -> str:
    """`1,234 events`, `1 event`."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def _top(rows: list[tuple[str, int]], n: int = 3) -> str:
    return ", ".join(f"{name} ({count})" for name, count in rows[:n])


def render_html(numbers: dict[str, Any]) -> str:
    """One self-contained page: the style, the chart code and the numbers inline."""
    # "</" cannot end the inline script early once written as "<\/" (still valid JSON)
    payload = json.dumps(numbers, separators=(",", ":")).replace("</", "<\\/")
    parts = {
        "/*@style*/": asset("style.css"),
        "/*@charts*/": asset("charts.js"),
        "/*@report*/": asset("report.js"),
        "/*@data*/": payload,
    }
    page = asset("report.html")
    for marker, text in parts.items():
        page = page.replace(marker, text, 1)
    return page
