"""End-to-end benchmark of `loopwatch scan` (read JSON lines, decode, detect, print
verdicts). Prints figures.

    .venv/bin/python ops/bench/scan_bench.py [--reps 3] [--events 100000] [--sessions 200]

Inputs: the shared real trajectories (../shared/data/trajectories next to the
repository; skipped with a message when absent) and a long file from
`ops/bench/synth.py` (generated into a temporary directory, deterministic).

Two ways for each input:
* `process`: the `loopwatch` console script as a subprocess, stdout to /dev/null; the
  figure includes interpreter start-up and imports (what a CI job pays);
* `in-process`: `streams.cli.main(["scan", FILE])` with stdout sent to /dev/null
  (imports already done: the steady-state figure).
Target (issue 2): scan >= 50,000 events/s on one core. Median of several repetitions.

Then, on each real trajectory file: `scan` in-process against the naive re-scan (each line
decoded with the same `decode_event`, then `ReplaySession` (rescan.py) replays the session's
whole history at every event; it writes no output, which favours it), run alternately
so both see the same load; min/median/max and the ratio of the medians. Target (issue
14): scan >= 4x the naive re-scan on tau-airline.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

import synth  # noqa: E402
from core_bench import machine, median_time  # noqa: E402
from rescan import ReplaySession  # noqa: E402

from loopwatch.models import DetectionConfig, decode_event  # noqa: E402
from loopwatch.streams.cli import main as cli_main  # noqa: E402

TRAJECTORIES = REPO.parent / "shared" / "data" / "trajectories"


def loopwatch_command() -> list[str]:
    script = Path(sys.executable).with_name("loopwatch")
    if script.exists():
        return [str(script)]
    return [
        sys.executable,
        "-c",
        "import sys; from loopwatch.streams.cli import main; sys.exit(main())",
    ]


def scan_process(path: Path) -> None:
    done = subprocess.run(
        [*loopwatch_command(), "scan", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"loopwatch scan {path} exited {done.returncode}: {done.stderr!r}")


def scan_in_process(path: Path) -> None:
    summary = io.StringIO()  # the one-line summary on stderr
    with (
        open(os.devnull, "w") as sink,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(summary),
    ):
        code = cli_main(["scan", str(path)])
    if code != 0:
        raise SystemExit(f"scan {path} returned {code}")


def naive_rescan(path: Path) -> int:
    """The history replay over a file: decode, then re-scan the session at each event."""
    config = DetectionConfig()
    sessions: dict[str, ReplaySession] = {}
    warnings = 0
    with path.open("rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            event = decode_event(line)
            replay = sessions.get(event.session_id)
            if replay is None:
                replay = sessions[event.session_id] = ReplaySession(config)
            _, warning = replay.feed(event)
            warnings += warning is not None
            if event.type == "session_end":
                del sessions[event.session_id]
    return warnings


def against_naive(path: Path, reps: int) -> None:
    """`scan` in-process and the naive re-scan, alternately; figures and their ratio."""
    lines = count_lines(path)
    times: dict[str, list[float]] = {"scan": [], "naive re-scan": []}
    for _ in range(reps):
        for name, run in (("naive re-scan", naive_rescan), ("scan", scan_in_process)):
            start = time.perf_counter()
            run(path)
            times[name].append(time.perf_counter() - start)
    for name, seconds in times.items():
        rates = sorted(lines / s for s in seconds)
        print(
            f"{name:14} {path.name:30} {lines:7,} events  events/s min {rates[0]:8,.0f} "
            f"median {statistics.median(rates):8,.0f} max {rates[-1]:8,.0f}"
        )
    ratio = statistics.median(times["naive re-scan"]) / statistics.median(times["scan"])
    print(f"scan / naive re-scan on {path.name}: {ratio:.2f}x (medians)")


def count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="End-to-end benchmark of loopwatch scan.")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--only-naive", action="store_true", help="only scan against the naive re-scan"
    )
    args = parser.parse_args(argv)
    print(f"scan_bench  {time.strftime('%Y-%m-%d %H:%M %Z')}  {machine()}")
    print(f"median of {args.reps} repetitions; events/s = input lines / wall time\n")

    if TRAJECTORIES.is_dir():
        for path in sorted(TRAJECTORIES.glob("*.jsonl")):
            against_naive(path, args.reps)
        print()
    if args.only_naive:
        return 0
    with tempfile.TemporaryDirectory(prefix="loopwatch-bench-") as tmp:
        inputs: list[Path] = []
        if TRAJECTORIES.is_dir():
            files = sorted(TRAJECTORIES.glob("*.jsonl"))
            both = Path(tmp) / "trajectories.jsonl"
            both.write_bytes(b"".join(path.read_bytes() for path in files))
            inputs += [*files, both]
        else:
            print(f"trajectories: skipped ({TRAJECTORIES} not found)")
        generated = Path(tmp) / f"synth-{args.sessions}x{args.events}.jsonl"
        with generated.open("w", encoding="utf-8") as out:
            for event in synth.generate(args.sessions, args.events, args.seed):
                out.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
        inputs.append(generated)

        for path in inputs:
            lines = count_lines(path)
            size = path.stat().st_size / 1e6
            for how, run in (("process", scan_process), ("in-process", scan_in_process)):
                seconds = median_time(lambda run=run, path=path: run(path), args.reps)
                print(
                    f"scan {how:10} {path.name:30} {lines:8,} events {size:6.1f} MB "
                    f"{seconds:7.2f} s {lines / seconds:10,.0f} events/s"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
