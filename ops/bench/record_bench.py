"""Session record formats: bytes per open session and encode/decode time, offline.

    .venv/bin/python ops/bench/record_bench.py [--sessions 200] [--events-per-session 20]

Loads `--sessions` synthetic open sessions (as `scale_bench.py` does: `session_end` left
out) through the pipeline into a `MemorySessionStore`, then for each session's record
prints, per record on average: bytes and times of version 1 (all JSON, the format before
issue 33), version 2 (header + JSON, `SessionRecord.encode`), and version 2 with its JSON
zlib-compressed (a candidate, not a format the worker writes), and what the expiry index
reads during a table recovery (`record_times`) against a full decode. Times are the best
of 5 rounds, in-process; compare the rows of one run only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit
import zlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)]

import pydantic_core  # noqa: E402
from synth import generate  # noqa: E402

from loopwatch.models import DetectionConfig  # noqa: E402
from loopwatch.streams.kafka.expiry import ExpiryIndex, epoch_seconds  # noqa: E402
from loopwatch.streams.worker.pipeline import PipelineOptions, process_record  # noqa: E402
from loopwatch.streams.worker.record import HEADER, SessionRecord, record_times  # noqa: E402
from loopwatch.streams.worker.store import MemorySessionStore  # noqa: E402


def version_1(record: SessionRecord) -> bytes:
    """The record as the code before issue 33 encoded it."""
    document: dict[str, Any] = {
        "v": 1,
        "state": None if record.state is None else record.state.to_snapshot(copy=False),
        "last_seq": record.last_seq,
        "last_ts": record.last_ts.isoformat(),
        "unconfirmed": [[seq, payload.decode()] for seq, payload in record.unconfirmed],
    }
    if record.seen is not None:
        document["seen"] = record.seen
    if record.seen_wall is not None:
        document["wall"] = record.seen_wall
    if record.unconfirmed_episodes:
        document["episodes"] = [[seq, p.decode()] for seq, p in record.unconfirmed_episodes]
    return pydantic_core.to_json(document)


def zlib_version_2(record: SessionRecord) -> bytes:
    encoded = record.encode()
    return encoded[: HEADER.size] + zlib.compress(encoded[HEADER.size :], 1)


def unzlib(data: bytes) -> SessionRecord:
    return SessionRecord.decode(data[: HEADER.size] + zlib.decompress(data[HEADER.size :]))


def open_records(sessions: int, per_session: int, seed: int) -> list[SessionRecord]:
    store = MemorySessionStore()
    options = PipelineOptions(DetectionConfig(), 64 * 1024)
    expiry = ExpiryIndex(timedelta(hours=1), timedelta(minutes=1))
    for event in generate(sessions, sessions * per_session, seed):
        if event["type"] == "session_end":
            continue
        stamp = datetime.fromisoformat(event["ts"])
        process_record(
            event["session_id"].encode(),
            json.dumps(event).encode(),
            store,
            options,
            expiry,
            partition=0,
            now=stamp.astimezone(UTC),
            log_time=epoch_seconds(stamp),
        )
    return list(store.records.values())


def per_item_us(function: Callable[[Any], object], items: Sequence[Any]) -> float:
    best = min(timeit.repeat(lambda: [function(item) for item in items], number=1, repeat=5))
    return best / len(items) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--events-per-session", type=int, default=20)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    records = open_records(args.sessions, args.events_per_session, args.seed)
    print(f"{len(records)} open sessions of {args.events_per_session} events (synthetic)")
    v1 = [version_1(record) for record in records]
    v2 = [record.encode() for record in records]
    packed = [zlib_version_2(record) for record in records]
    assert [SessionRecord.decode(data) for data in v1] == records
    assert [unzlib(data) for data in packed] == records
    rows = [
        ("version 1 (JSON)", v1, version_1, SessionRecord.decode),
        ("version 2 (header + JSON)", v2, SessionRecord.encode, SessionRecord.decode),
        ("version 2, JSON zlib-compressed (level 1)", packed, zlib_version_2, unzlib),
    ]
    print("format | bytes per record | encode µs | decode µs")
    for name, encoded, encode, decode in rows:
        size = statistics.mean(len(data) for data in encoded)
        print(
            f"{name} | {size:,.0f} | {per_item_us(encode, records):.1f} | "
            f"{per_item_us(decode, encoded):.1f}"
        )
    print(
        "what the index reads at recovery: "
        f"version 1 full decode {per_item_us(SessionRecord.decode, v1):.1f} µs, "
        f"version 1 record_times {per_item_us(record_times, v1):.1f} µs, "
        f"version 2 record_times {per_item_us(record_times, v2):.2f} µs"
    )


if __name__ == "__main__":
    main()
