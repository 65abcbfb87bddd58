"""The otel-bridge's pure work per span, without Kafka: decode an exporter record
(`otlp_proto` and `otlp_json`), map each span to its record, admit it to its session and
release the session as events. Prints spans/s per stage and in total.

    .venv/bin/python ops/bench/otel_bench.py [--sessions 200] [--turns 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # loopwatch, from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # otel_agent

from otel_agent import InstrumentedAgent, Tool, export_records

from loopwatch.streams.otel.mapping import SpanRecord, to_record
from loopwatch.streams.otel.ordering import BridgeSession, admit, release
from loopwatch.streams.otel.spans import Encoding, Span, decode_spans


def records(sessions: int, turns: int, encoding: str) -> list[bytes]:
    values: list[bytes] = []
    for number in range(sessions):
        agent = InstrumentedAgent(agent_id=f"agent-{number % 5}")
        agent.run(
            f"conv-{number}",
            [
                [
                    Tool("read_file", {"path": f"f{turn % 7}.py", "offset": turn % 3 * 100}),
                    Tool("bash", {"command": f"make {turn % 4}"}, result={"exit": turn % 2}),
                ]
                for turn in range(turns)
            ],
        )
        values += export_records(agent.spans(), encoding, batch=64)
    return values


def bench(values: list[bytes], encoding: Encoding) -> None:
    started = time.perf_counter()
    spans: list[Span] = [span for value in values for span in decode_spans(value, encoding)]
    decoded = time.perf_counter()
    mapped: list[SpanRecord] = [r for s in spans if (r := to_record(s, 0)) is not None]
    mapping = time.perf_counter()
    sessions: dict[str, BridgeSession] = {}
    for record in mapped:
        sessions[record.session_id] = admit(sessions.get(record.session_id), record)[0]
    admitted = time.perf_counter()
    events = sum(len(release(session)[1]) for session in sessions.values())
    released = time.perf_counter()
    n = len(spans)
    print(f"{encoding}: {len(values)} records, {n} spans ({len(mapped)} GenAI), {events} events")
    for stage, seconds in (
        ("decode", decoded - started),
        ("map", mapping - decoded),
        ("admit", admitted - mapping),
        ("release", released - admitted),
        ("total", released - started),
    ):
        print(f"  {stage:8} {seconds * 1000:8.1f} ms  {n / seconds:10,.0f} spans/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    for encoding in ("otlp_proto", "otlp_json"):
        bench(records(args.sessions, args.turns, encoding), encoding)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
