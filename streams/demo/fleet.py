"""The demo's fleet: scripted looping agents, built-in clean sessions and (when present)
recorded trajectories, all through one `LoopwatchClient`, as one runtime process would.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from loopwatch.models import RULES, RuleName
from loopwatch.streams.client import LoopwatchClient, PlacedWarning
from loopwatch.streams.demo.builtin import BUILTIN
from loopwatch.streams.demo.conversation import Conversation, Format
from loopwatch.streams.demo.loopers import LOOPERS, LoopOutcome
from loopwatch.streams.demo.replay import Recording, recordings_from_events, replay
from loopwatch.streams.settings import Settings

# Anthropic has no two assistant messages in a row, which the empty-search script needs.
LOOPER_FORMATS: dict[RuleName, tuple[Format, ...]] = {
    "repeated_failed_mutation": ("openai", "anthropic"),
    "repeated_result": ("openai",),
    "repeated_read_range": ("openai", "anthropic"),
    "repeated_batch": ("openai", "anthropic"),
}


@dataclass
class FleetSummary:
    sessions: int = 0
    events: int = 0
    warnings: dict[str, int] = field(default_factory=dict)
    placed: int = 0
    loops: int = 0
    loops_broken: int = 0
    clean_sessions_warned: list[str] = field(default_factory=list)
    waits: int = 0
    timeouts: int = 0
    wait_p50: float | None = None
    wait_p99: float | None = None

    def lines(self) -> list[str]:
        rules = ", ".join(f"{rule} {self.warnings.get(rule, 0)}" for rule in RULES)
        p50 = "-" if self.wait_p50 is None else f"{self.wait_p50 * 1000:.1f} ms"
        p99 = "-" if self.wait_p99 is None else f"{self.wait_p99 * 1000:.1f} ms"
        clean = ", ".join(self.clean_sessions_warned) or "none"
        return [
            f"events          {self.events:,}",
            f"sessions        {self.sessions:,}",
            f"warnings        {sum(self.warnings.values()):,} ({rules})",
            f"placed          {self.placed:,} warnings placed into prompts",
            f"loops broken    {self.loops_broken} of {self.loops} scripted loops",
            f"clean, warned   {clean} (built-in clean sessions that got a warning)",
            f"verdict wait    p50 {p50}, p99 {p99} ({self.waits:,} waits, "
            f"{self.timeouts} timed out)",
        ]


class Fleet:
    """Runs the agents and prints each warning as it reaches a prompt."""

    def __init__(
        self,
        settings: Settings,
        *,
        trajectories: Path | None,
        trajectory_limit: int | None,
        concurrency: int = 32,
        verdict_timeout: float = 5.0,
        out: IO[str] = sys.stdout,
    ) -> None:
        self.settings = settings
        self.trajectories = trajectories
        self.trajectory_limit = trajectory_limit
        self.concurrency = concurrency
        self.verdict_timeout = verdict_timeout
        self.out = out
        self.run_id = uuid.uuid4().hex[:6]
        self.summary = FleetSummary()
        self._done = 0
        self._total = 0
        self._live = out.isatty()
        self._announced: set[tuple[str, str]] = set()  # (session, rule) printed once

    async def run(self) -> FleetSummary:
        jobs = self._jobs()
        self._total = len(jobs)
        gate = asyncio.Semaphore(self.concurrency)
        async with LoopwatchClient.from_settings(
            self.settings, verdict_timeout=self.verdict_timeout, agent_id="loopwatch-demo"
        ) as client:

            async def run_job(job: Job) -> None:
                async with gate:
                    await self._run(client, job)

            await asyncio.gather(*(run_job(job) for job in jobs))
            stats = client.stats
        self._progress(final=True)
        self.summary.events = stats.published
        self.summary.warnings = dict(stats.warnings)
        self.summary.waits, self.summary.timeouts = stats.waits, stats.timeouts
        self.summary.wait_p50 = stats.wait_percentile(0.50)
        self.summary.wait_p99 = stats.wait_percentile(0.99)
        return self.summary

    def _jobs(self) -> list[Job]:
        jobs = [
            Job(f"loop-{rule}-{fmt}", "loopers", fmt, looper=LOOPERS[rule])
            for rule, formats in LOOPER_FORMATS.items()
            for fmt in formats
        ]
        jobs += [
            Job(f"clean-{rec.name}-{fmt}", rec.agent_id, fmt, recording=rec)
            for rec in BUILTIN
            for fmt in ("openai", "anthropic")
        ]
        if self.trajectories is not None:
            for path in sorted(self.trajectories.glob("*.jsonl")):
                for rec in recordings_from_events(path, self.trajectory_limit):
                    jobs.append(Job(f"replay-{rec.name}", rec.agent_id, "openai", recording=rec))
        return jobs

    async def _run(self, client: LoopwatchClient, job: Job) -> None:
        session_id = f"demo-{self.run_id}-{job.name}"
        async with await client.open_session(session_id, agent_id=job.agent_id) as session:
            conv = Conversation(session, job.format, on_placed=self._placed)
            if job.looper is not None:
                outcome: LoopOutcome = await job.looper(conv)
                self.summary.loops += 1
                self.summary.loops_broken += outcome.broken
                after = f"after {outcome.warned_after} repeats" if outcome.broken else "never"
                self._say(
                    f"  {job.name}: warning reached the prompt {after}; "
                    f"{'changed approach' if outcome.broken else 'gave up'}"
                )
            elif job.recording is not None:
                await replay(conv, job.recording.turns)
                if job.name.startswith("clean-") and session.warnings_by_message():
                    self.summary.clean_sessions_warned.append(job.name)
        self.summary.sessions += 1
        self._done += 1
        self._progress()

    def _placed(self, conv: Conversation, placed: PlacedWarning) -> None:
        self.summary.placed += 1
        w = placed.warning
        name = conv.session.session_id.removeprefix(f"demo-{self.run_id}-")
        if (name, w.rule) in self._announced:
            return  # a loop that goes on warns again on every repeat: say it once
        self._announced.add((name, w.rule))
        self._say(
            f"  ! {name} [{conv.format}] {w.rule} {w.count}/{w.threshold} "
            f"({', '.join(w.tool_names)}) -> placed after message #{placed.message_index}"
        )

    def _say(self, line: str) -> None:
        if self._live:
            print("\r\033[K", end="", file=self.out)
        print(line, file=self.out, flush=True)
        if self._live:
            self._progress()

    def _progress(self, final: bool = False) -> None:
        text = (
            f"  [{self._done}/{self._total} sessions done, {self.summary.placed} warnings placed]"
        )
        if self._live:
            print(f"\r\033[K{text}", end="\n" if final else "", file=self.out, flush=True)
        elif final or (self._done % 50 == 0 and self._done):
            print(text, file=self.out, flush=True)


@dataclass(frozen=True)
class Job:
    name: str
    agent_id: str
    format: Format
    looper: Callable[[Conversation], Awaitable[LoopOutcome]] | None = None
    recording: Recording | None = None
