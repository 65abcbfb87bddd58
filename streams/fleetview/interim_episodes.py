"""TEMPORARY: loop episodes derived from verdicts, until the detector core tracks them
(issue 12 part 1). Replace with the scanner's episodes once they are on main.

Per session and rule, a run of warnings is one loop: it begins with the rule's first
warning, and ends (`broken`) at the first verdict without any warning, at the session's
end (`session_ended`), or at the end of the input (`expired`). It sees no subject, so the
`subject` it reports names only the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from loopwatch.models import EpisodeOutcome, LoopEpisode, LoopVerdict, RuleName


@dataclass
class _Run:
    rule: RuleName
    tool_names: tuple[str, ...]
    first_seq: int
    started_at: datetime
    last_seq: int
    last_at: datetime
    peak_count: int
    warnings: int = 1


class EpisodesFromWarnings:
    """Feed every verdict of every session in order; collect the closed loops."""

    def __init__(self) -> None:
        self._open: dict[str, dict[RuleName, _Run]] = {}
        self._agents: dict[str, str | None] = {}

    def observe(self, verdict: LoopVerdict, session_ended: bool) -> list[LoopEpisode]:
        sid = verdict.session_id
        self._agents[sid] = verdict.agent_id
        runs = self._open.setdefault(sid, {})
        warning = verdict.warning
        closed: list[LoopEpisode] = []
        if warning is None:
            outcome: EpisodeOutcome = "session_ended" if session_ended else "broken"
            closed = [
                self._close(sid, run, verdict.seq, verdict.event_ts, outcome)
                for run in runs.values()
            ]
            runs.clear()
        elif (run := runs.get(warning.rule)) is not None:
            run.last_seq, run.last_at = verdict.seq, verdict.event_ts
            run.warnings += 1
            run.peak_count = max(run.peak_count, warning.count)
        else:
            runs[warning.rule] = _Run(
                warning.rule,
                warning.tool_names,
                verdict.seq,
                verdict.event_ts,
                verdict.seq,
                verdict.event_ts,
                warning.count,
            )
        if session_ended:
            closed += [
                self._close(sid, run, verdict.seq, verdict.event_ts, "session_ended")
                for run in runs.values()
            ]
            del self._open[sid]
        return closed

    def finish(self) -> list[LoopEpisode]:
        """Loops still open at the end of the input, closed `expired`."""
        closed = [
            self._close(sid, run, run.last_seq, run.last_at, "expired")
            for sid, runs in self._open.items()
            for run in runs.values()
        ]
        self._open.clear()
        return closed

    def _close(
        self, sid: str, run: _Run, seq: int, at: datetime, outcome: EpisodeOutcome
    ) -> LoopEpisode:
        return LoopEpisode(
            session_id=sid,
            agent_id=self._agents.get(sid),
            rule=run.rule,
            subject=f"interim:{run.rule}",
            tool_names=run.tool_names,
            first_seq=run.first_seq,
            last_seq=seq,
            started_at=run.started_at,
            ended_at=at,
            peak_count=run.peak_count,
            warnings=run.warnings,
            outcome=outcome,
            duration_seconds=max((at - run.started_at).total_seconds(), 0.0),
        )
