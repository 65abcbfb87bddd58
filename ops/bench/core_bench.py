"""Benchmark of the pure detector core (`streams.detector.observe`). Prints figures.

    .venv/bin/python ops/bench/core_bench.py [--reps 5] [--profile seed|extended]

1. events/s of the core on the shared real trajectories (../shared/data/trajectories,
   next to the repository; skipped with a message when absent) and on one long
   synthetic session (ops/bench/synth.py);
2. per-event cost at session length 100 vs 20,000 (target: ratio <= 1.5);
3. the naive history-replay approach (keep the whole history and re-scan it at each
   event: here, the core run over the history from an empty state) at lengths
   100 / 1,000 / 5,000, and its cost relative to the core.

Events are decoded before timing: the figures are the core's alone (`scan_bench.py`
measures end to end). Each figure is the median of several repetitions. `--profile
extended` runs every rule (docs/contract.md §9); the history replay (3.) is the seed's.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

import synth  # noqa: E402

from loopwatch.models import EVENT_ADAPTER, AgentEvent, DetectionConfig  # noqa: E402
from loopwatch.streams.detector import SessionState, observe  # noqa: E402

TRAJECTORIES = REPO.parent / "shared" / "data" / "trajectories"
CONFIGS = {"seed": DetectionConfig(), "extended": DetectionConfig(profile="extended")}
CONFIG = CONFIGS["seed"]
"""The config the core runs with (main() sets it from --profile)."""


def median_time(run: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def decode_all(raws: Sequence[dict[str, Any]]) -> list[AgentEvent]:
    return [EVENT_ADAPTER.validate_python(raw) for raw in raws]


def run_sessions(events: Sequence[AgentEvent]) -> int:
    """The core over interleaved sessions, as the stream app runs it; returns warnings."""
    states: dict[str, SessionState] = {}
    warnings = 0
    config = CONFIG
    for event in events:
        state, verdict = observe(states.get(event.session_id), event, config)
        if state is None:
            states.pop(event.session_id, None)
        else:
            states[event.session_id] = state
        if verdict is not None and verdict.warning is not None:
            warnings += 1
    return warnings


def periodic_session(length: int, period: int = 100, seed: int = 3) -> list[dict[str, Any]]:
    """A session whose content repeats every `period` events (fresh call ids, seq and ts),
    so that a window at length 100 and one at 20,000 see the same kind of events."""
    block = list(synth.session("periodic", period + 1, seed))[:period]  # no session_end
    out: list[dict[str, Any]] = []
    epoch = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    for cycle in range(length // period + 1):
        for raw in block:
            event = copy.deepcopy(raw)
            event["seq"] = seq = cycle * period + raw["seq"]
            event["ts"] = (epoch + timedelta(seconds=seq)).isoformat().replace("+00:00", "Z")
            for call in event.get("tool_calls") or ():
                call["id"] = f"{call['id']}~{cycle}"
            if "call_id" in event:
                event["call_id"] = f"{event['call_id']}~{cycle}"
            out.append(event)
    return out[:length]


def core_cost_at(events: Sequence[AgentEvent], length: int, window: int, reps: int) -> float:
    """Seconds per event for events [length, length + window), starting each repetition
    from the state after `length` events (restored from its snapshot, untimed)."""
    state: SessionState | None = None
    for event in events[:length]:
        state, _ = observe(state, event, CONFIG)
    assert state is not None
    snapshot = state.to_snapshot()
    todo = events[length : length + window]
    assert len(todo) == window
    times = []
    for _ in range(reps):
        current: SessionState | None = SessionState.from_snapshot(copy.deepcopy(snapshot))
        start = time.perf_counter()
        for event in todo:
            current, _ = observe(current, event, CONFIG)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / window


def replay(history: Sequence[AgentEvent]) -> object:
    """The verdict of the newest event, re-scanning the whole history from scratch."""
    state: SessionState | None = None
    verdict = None
    for event in history:
        state, verdict = observe(state, event, CONFIG)
    return verdict


def replay_cost_at(events: Sequence[AgentEvent], length: int, reps: int) -> float:
    """Seconds per event for the history replay: one full re-scan at session length n."""
    history = list(events[:length])
    return median_time(lambda: replay(history), reps)


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark of the detector core.")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per figure")
    parser.add_argument("--long", type=int, default=50_000, help="long session length")
    parser.add_argument("--profile", choices=sorted(CONFIGS), default="seed")
    args = parser.parse_args(argv)
    reps = args.reps
    global CONFIG  # noqa: PLW0603  (a benchmark script: one config per run)
    CONFIG = CONFIGS[args.profile]
    print(f"core_bench  {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {machine()}")
    print(
        f"median of {reps} repetitions; profile {CONFIG.profile}, rules "
        f"{', '.join(CONFIG.enabled_rules)}; thresholds {CONFIG.threshold}/"
        f"{CONFIG.mutating_failure_threshold}\n"
    )

    # 1. Throughput on real trajectories and on a long synthetic session.
    files = sorted(TRAJECTORIES.glob("*.jsonl")) if TRAJECTORIES.is_dir() else []
    if not files:
        print(f"trajectories: skipped ({TRAJECTORIES} not found)")
    for path in files:
        lines = path.read_bytes().splitlines()
        events = [EVENT_ADAPTER.validate_json(line) for line in lines if line.strip()]
        seconds = median_time(lambda events=events: run_sessions(events), reps)
        sessions = len({event.session_id for event in events})
        print(
            f"core, {path.name:28} {len(events):7,} events {sessions:4} sessions  "
            f"{len(events) / seconds:10,.0f} events/s"
        )
    long_events = decode_all(list(synth.session("long", args.long, seed=11)))
    seconds = median_time(lambda: run_sessions(long_events), max(1, reps // 2))
    print(
        f"core, one synthetic session     {len(long_events):7,} events   "
        f"{len(long_events) / seconds:10,.0f} events/s\n"
    )

    # 2. Per-event cost at session length 100 vs 20,000.
    window = 1_000
    periodic = decode_all(periodic_session(20_000 + window))
    at_100 = core_cost_at(periodic, 100, window, reps * 4)
    at_20k = core_cost_at(periodic, 20_000, window, reps * 4)
    print(f"core per event at length    100: {at_100 * 1e6:8.2f} us  (window of {window})")
    print(f"core per event at length 20,000: {at_20k * 1e6:8.2f} us")
    print(f"ratio 20,000 / 100: {at_20k / at_100:.2f}x  (target <= 1.5x)\n")

    # 3. The naive history replay (a re-scan at each event) against the core.
    for length in (100, 1_000, 5_000) if CONFIG.profile == "seed" else ():
        replay = replay_cost_at(periodic, length, reps)
        core = core_cost_at(periodic, length, window, reps * 4)
        print(
            f"history replay at length {length:6,}: {1 / replay:10,.0f} events/s  "
            f"core {1 / core:10,.0f} events/s  core is {replay / core:8,.0f}x faster"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
