"""The expiry index's RAM per open session (tracemalloc), offline:

    PYTHONPATH=$PWD .venv/bin/python ops/bench/expiry_mem_bench.py [--sessions 100000] [--touches 5]

`--sessions` sessions with 36-character ids over 4 partitions, each touched `--touches`
times in turn (`ExpiryIndex.touch_at`, a new id string per touch as decoded events bring
them); prints the bytes traced per session, the id strings the index keeps included.
Run it with PYTHONPATH set to another checkout for an A/B (docs/performance.md §4).
"""

from __future__ import annotations

import argparse
import tracemalloc
import uuid
from datetime import timedelta

from loopwatch.streams.kafka import expiry
from loopwatch.streams.kafka.expiry import ExpiryIndex


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--touches", type=int, default=5)
    args = parser.parse_args()
    ids = [str(uuid.UUID(int=n + 1)) for n in range(args.sessions)]
    tracemalloc.start()
    index = ExpiryIndex(timedelta(hours=1), timedelta(minutes=5))
    seen = 1_700_000_000.0
    for _ in range(args.touches):
        for n, session_id in enumerate(ids):
            seen += 0.001
            copy = "".join(session_id)  # (a new str, as each decoded event's)
            index.touch_at(n % 4, copy, seen, ended=False, wall=seen)
    traced = tracemalloc.get_traced_memory()[0]
    print(
        f"{expiry.__file__}: {args.sessions:,} sessions touched {args.touches}x: "
        f"{traced / args.sessions:,.0f} B per session"
    )


if __name__ == "__main__":
    main()
