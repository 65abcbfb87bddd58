"""What the history tracker costs a runtime per model call (no broker: events go to a
list and verdicts are not awaited). Prints figures.

    .venv/bin/python ops/bench/tracker_bench.py [--messages 400] [--reps 5]

A Chat history grows by one tool step (assistant message + tool message) per model call,
up to `--messages`; before each call the tracker digests the whole history, finds what is
new and publishes it (`HistoryTracker.publish`). Reported: the mean time per call at the
final history length and the total over the session, median of `--reps` runs; plus the
pure conversion `history_events` over the final history.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from loopwatch.streams.client import HistoryTracker, history_events
from loopwatch.streams.client.encoding import EventEncoder
from loopwatch.streams.client.session import Session
from loopwatch.streams.client.stats import ClientStats


def step(n: int) -> list[dict[str, Any]]:
    arguments = json.dumps({"path": f"src/module_{n % 7}.py", "offset": n % 3})
    call = {"id": f"call_{n}", "type": "function", "function": {"name": "read_file"}}
    call["function"]["arguments"] = arguments
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": "x = 1\n" * 40},
    ]


async def one_session(messages: int) -> tuple[float, float]:
    published: list[bytes] = []

    async def publish(_session_id: str, record: bytes) -> None:
        published.append(record)

    session = Session(
        session_id="bench",
        encoder=EventEncoder(session_id="bench", agent_id=None, local_fingerprints=False),
        publish=publish,
        on_close=lambda _s: None,
        stats=ClientStats(),
        clock=lambda: datetime.now(UTC),
        default_timeout=0.0,
    )
    tracker = HistoryTracker(session, "openai")
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    total = last = 0.0
    n = 0
    while len(history) < messages:
        history += step(n)
        n += 1
        started = time.perf_counter()
        await tracker.publish(history)
        last = time.perf_counter() - started
        total += last
    assert len(published) == len(history)
    return last, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    runs = [asyncio.run(one_session(args.messages)) for _ in range(args.reps)]
    last = statistics.median(r[0] for r in runs)
    total = statistics.median(r[1] for r in runs)
    history = [{"role": "user", "content": "go"}]
    for n in range(args.messages // 2):
        history += step(n)
    started = time.perf_counter()
    history_events(history, "openai")
    convert = time.perf_counter() - started
    print(f"history of {args.messages} messages, median of {args.reps} sessions:")
    print(f"  tracker.publish at the last call: {last * 1e3:.2f} ms")
    print(f"  all calls of the session:         {total * 1e3:.1f} ms")
    print(f"  history_events over the history:  {convert * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
