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
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

import synth  # noqa: E402
from core_bench import machine, median_time  # noqa: E402

from streams.cli import main as cli_main  # noqa: E402

TRAJECTORIES = REPO.parent / "shared" / "data" / "trajectories"


def loopwatch_command() -> list[str]:
    script = Path(sys.executable).with_name("loopwatch")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from streams.cli import main; sys.exit(main())"]


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


def count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="End-to-end benchmark of loopwatch scan.")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"scan_bench  {time.strftime('%Y-%m-%d %H:%M %Z')}  {machine()}")
    print(f"median of {args.reps} repetitions; events/s = input lines / wall time\n")

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
