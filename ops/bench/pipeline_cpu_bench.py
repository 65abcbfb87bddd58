"""CPU time per event of the worker's per-record pipeline, without Kafka. Prints figures.

    .venv/bin/python ops/bench/pipeline_cpu_bench.py [--events 30000] [--sessions 200]
        [--reps 5] [--repo PATH] [--against PATH --rounds 10]

`process_record` (decode, key and size checks, duplicates, the detector with loop
episodes, the verdict's JSON, expiry) over a synthetic backlog (`synth.py`, the worker
bench's records) with an in-memory session store, then the session record's encode and
decode (the worker writes a session's record once per offset commit and reads it back at
recovery). Timed with `time.process_time`, the fastest of `--reps` runs: on a shared,
loaded machine the CPU time of the best run moves far less than wall-clock medians.
`--repo` measures another checkout (e.g. `git worktree add --detach ../wt-main main`)
with this interpreter, for a before/after ratio. `--against` does that A/B in one run: a
process per checkout, each holding its modules and records, runs `process_record` over
the backlog once per round, alternating A, B, A, B, ...; it prints each checkout's
median and fastest run. On a machine others load, a checkout's best of five in separate
processes moved by ±30% from one invocation to the next; alternating whole runs of the
two keeps both under the same load.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth import generate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--repo", type=Path, default=HERE)
    parser.add_argument("--against", type=Path, help="a second checkout: alternate with it")
    parser.add_argument("--rounds", type=int, default=10, help="with --against")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    if args.against is not None:
        return _alternate([args.against.resolve(), repo], args)
    modules = _pipeline(repo)
    records = [
        (event["session_id"].encode(), json.dumps(event).encode())
        for event in generate(args.sessions, args.events, seed=1)
    ]
    if args.serve:  # one run per line read, after one to warm up; prints its CPU per event
        _best_pipeline(modules, records, 1)
        for _line in sys.stdin:
            print(f"{_best_pipeline(modules, records, 1)[0]:.3f}", flush=True)
        return 0
    per_event, stored = _best_pipeline(modules, records, args.reps)
    encode, decode, size = _best_record_codec(modules, stored, args.reps)
    print(
        f"{repo.name:14} {len(records):,} events  "
        f"process_record {per_event:6.1f} us/event  "
        f"record encode {encode:5.1f} us, decode {decode:5.1f} us "
        f"({size:,.0f} bytes on average)  CPU, best of {args.reps}"
    )
    return 0


def _alternate(repos: list[Path], args: argparse.Namespace) -> int:
    """`process_record`'s CPU per event in each checkout, runs alternated between them."""
    command = [sys.executable, __file__, "--serve", "--events", str(args.events)]
    command += ["--sessions", str(args.sessions)]
    workers = [
        subprocess.Popen(
            [*command, "--repo", str(repo)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for repo in repos
    ]
    runs: list[list[float]] = [[] for _ in repos]
    try:
        for _ in range(args.rounds):
            for worker, times in zip(workers, runs, strict=True):
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write("run\n")
                worker.stdin.flush()
                times.append(float(worker.stdout.readline()))
    finally:
        for worker in workers:
            if worker.stdin is not None:
                worker.stdin.close()
            worker.wait()
    for repo, times in zip(repos, runs, strict=True):
        print(
            f"{repo.name:14} {args.events:,} events  process_record median "
            f"{statistics.median(times):6.1f} us/event, fastest {min(times):6.1f}  "
            f"CPU, {args.rounds} runs alternated ({' '.join(f'{t:.1f}' for t in times)})"
        )
    return 0


def _best_pipeline(
    modules: dict[str, Any], records: list[tuple[bytes, bytes]], reps: int
) -> tuple[float, list[Any]]:
    process_record = modules["pipeline"].process_record
    options = modules["pipeline"].PipelineOptions(
        detection=modules["models"].DetectionConfig(), max_event_bytes=1 << 20
    )
    now = datetime(2026, 12, 3, tzinfo=UTC)
    best, stored = float("inf"), []
    for _ in range(reps):
        store = modules["store"].MemorySessionStore()
        expiry = modules["expiry"].ExpiryIndex(
            idle_ttl=timedelta(hours=1), ended_retention=timedelta(minutes=5)
        )
        half = len(records) // 2
        start = time.process_time()
        for key, value in records[:half]:
            process_record(key, value, store, options, expiry, partition=key[-1] % 12, now=now)
        elapsed = time.process_time() - start
        # the sessions' records in mid-flight (at the end most sessions have ended)
        stored = list(store.records.values())
        start = time.process_time()
        for key, value in records[half:]:
            process_record(key, value, store, options, expiry, partition=key[-1] % 12, now=now)
        best = min(best, elapsed + time.process_time() - start)
    return best / len(records) * 1e6, stored


def _best_record_codec(modules: dict[str, Any], stored: list[Any], reps: int) -> tuple[float, ...]:
    decode_record = modules["record"].SessionRecord.decode
    encoded = [record.encode() for record in stored]
    best_encode = best_decode = float("inf")
    for _ in range(reps):
        start = time.process_time()
        for record in stored:
            record.encode()
        best_encode = min(best_encode, time.process_time() - start)
        start = time.process_time()
        for data in encoded:
            decode_record(data)
        best_decode = min(best_decode, time.process_time() - start)
    count = max(len(stored), 1)
    size = sum(map(len, encoded)) / count
    return best_encode / count * 1e6, best_decode / count * 1e6, size


def _pipeline(repo: Path) -> dict[str, Any]:
    """The pipeline's modules from the checkout at `repo`."""
    sys.path.insert(0, str(repo))
    names = ("models", "pipeline", "store", "expiry", "record")
    paths = (
        "loopwatch.models",
        "loopwatch.streams.worker.pipeline",
        "loopwatch.streams.worker.store",
        "loopwatch.streams.kafka.expiry",
        "loopwatch.streams.worker.record",
    )
    modules = {name: importlib.import_module(path) for name, path in zip(names, paths, strict=True)}
    for module in modules.values():
        where = Path(module.__file__ or "").resolve()
        if not where.is_relative_to(repo):
            raise SystemExit(f"{module.__name__} was imported from {where}, not from {repo}")
    return modules


if __name__ == "__main__":
    sys.exit(main())
