"""CPU time per event of the worker's per-record pipeline, without Kafka. Prints figures.

    .venv/bin/python ops/bench/pipeline_cpu_bench.py [--events 30000] [--sessions 200]
        [--reps 5] [--repo PATH]

`process_record` (decode, key and size checks, duplicates, the detector with loop
episodes, the verdict's JSON, expiry) over a synthetic backlog (`synth.py`, the worker
bench's records) with an in-memory session store, then the session record's encode and
decode (the worker writes a session's record once per offset commit and reads it back at
recovery). Timed with `time.process_time`, the fastest of `--reps` runs: on a shared,
loaded machine the CPU time of the best run moves far less than wall-clock medians.
`--repo` measures another checkout (e.g. `git worktree add --detach ../wt-main main`)
with this interpreter, for a before/after ratio.
"""

from __future__ import annotations

import argparse
import importlib
import json
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
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    modules = _pipeline(repo)
    records = [
        (event["session_id"].encode(), json.dumps(event).encode())
        for event in generate(args.sessions, args.events, seed=1)
    ]
    per_event, stored = _best_pipeline(modules, records, args.reps)
    encode, decode, size = _best_record_codec(modules, stored, args.reps)
    print(
        f"{repo.name:14} {len(records):,} events  "
        f"process_record {per_event:6.1f} us/event  "
        f"record encode {encode:5.1f} us, decode {decode:5.1f} us "
        f"({size:,.0f} bytes on average)  CPU, best of {args.reps}"
    )
    return 0


def _best_pipeline(
    modules: dict[str, Any], records: list[tuple[bytes, bytes]], reps: int
) -> tuple[float, list[Any]]:
    process_record = modules["processing"].process_record
    options = modules["processing"].PipelineOptions(
        detection=modules["models"].DetectionConfig(), max_event_bytes=1 << 20
    )
    now = datetime(2026, 12, 3, tzinfo=UTC)
    best, stored = float("inf"), []
    for _ in range(reps):
        store = modules["session_store"].MemorySessionStore()
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
    decode_record = modules["session_record"].SessionRecord.decode
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
    names = ("models", "processing", "session_store", "expiry", "session_record")
    paths = (
        "loopwatch.models",
        "loopwatch.streams.processing",
        "loopwatch.streams.session_store",
        "loopwatch.streams.expiry",
        "loopwatch.streams.session_record",
    )
    modules = {name: importlib.import_module(path) for name, path in zip(names, paths, strict=True)}
    for module in modules.values():
        where = Path(module.__file__ or "").resolve()
        if not where.is_relative_to(repo):
            raise SystemExit(f"{module.__name__} was imported from {where}, not from {repo}")
    return modules


if __name__ == "__main__":
    sys.exit(main())
