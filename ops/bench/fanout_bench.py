"""Verdict fan-out: what each runtime process of a fleet receives, with and without reply
partitions (docs/client.md, "Reply partitions").

    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 .venv/bin/python ops/bench/fanout_bench.py \
        [--processes 8] [--verdict-partitions 16] [--seconds 8] [--rate 400] [--sessions 160]

One `loopwatch worker` child (topics of its own) and three rounds of runtime processes,
each a child running one `LoopwatchClient` with simulated agents of
`client_wait_bench.py` (paced: `--sessions` agents in all stepping for `--rate` events/s
in all, split evenly over the processes of a round):

* `single`: one process with every agent, reading every verdict partition (the client
  before reply partitions: `reply_partitions=False`), the baseline wait;
* `fan-out, all partitions`: `--processes` processes, each reading every partition;
* `fan-out, reply partitions`: `--processes` processes, each reading only the
  partitions its consumer group claim gives it.

Printed per process of a round, over its measured seconds: verdict records received
(and their share of the fleet's verdicts in those seconds), bytes received, the process's
CPU seconds, the wait (`verdicts()`) p50/p99 and timeouts; per round the waits of all its
processes together, the worker's cores and the machine's busy cores and host steal. A
process starts counting once every process of its round holds its claim. Benchmarks
print; tests never time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from client_wait_bench import Load, run_load  # noqa: E402
from core_bench import machine  # noqa: E402
from harness import Usage, machine_load, worker_env  # noqa: E402

from loopwatch.streams.client import LoopwatchClient  # noqa: E402
from loopwatch.streams.demo.worker_process import start_worker  # noqa: E402
from loopwatch.streams.kafka.admin import create_topics, delete_topics  # noqa: E402
from loopwatch.streams.settings import Settings  # noqa: E402

VERDICT_TIMEOUT = 5.0
STEPS = 10


# -- one runtime process (a child) ------------------------------------------------------


async def child(args: argparse.Namespace) -> None:
    """Start the client, say `ready` with the claim, wait for `go` on stdin, run the
    paced agents, print the figures as one JSON line."""
    settings = Settings.from_env()
    async with LoopwatchClient.from_settings(
        settings, verdict_timeout=VERDICT_TIMEOUT, log_timeouts=False, reply_partitions=args.reply
    ) as client:
        await client.connect()  # it connects in the background; the bench waits for it
        claimed = await client.reader.claimed()
        print(json.dumps({"ready": sorted(claimed)}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # the parent's go
        per_step = 2 + 2 / STEPS
        interval = args.sessions * per_step / args.rate
        load = Load(f"p{args.index}", args.sessions, interval)
        reader = client.reader
        marks: dict[str, float] = {}

        async def mark() -> None:
            await asyncio.sleep(args.warmup)  # the measured window's start: pacing, not sync
            marks["records"], marks["bytes"] = reader.records_received, reader.bytes_received
            marks["cpu"], marks["events"] = time.process_time(), load.events

        marker = asyncio.ensure_future(mark())
        load, _seconds = await run_load(client, load, args)
        await marker
        result = {
            "index": args.index,
            "read": sorted(reader.assigned_partitions),
            "records": reader.records_received - marks["records"],
            "bytes": reader.bytes_received - marks["bytes"],
            "cpu": time.process_time() - marks["cpu"],
            "events": load.events - marks["events"],
            "timeouts": load.timeouts,
            "waits": [round(w, 6) for w in load.waited],
        }
        print(json.dumps(result), flush=True)


# -- the parent ----------------------------------------------------------------------


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return float("nan")
    return statistics.quantiles(sorted(values), n=100)[q - 1] * 1000


async def run_round(
    name: str,
    processes: int,
    reply: bool,
    *,
    args: argparse.Namespace,
    env: dict[str, str],
    worker_pid: int,
) -> None:
    children = []
    for index in range(processes):
        argv = [
            sys.executable, __file__, "--child", "--index", str(index),
            "--rate", str(args.rate / processes), "--sessions", str(args.sessions // processes),
            "--seconds", str(args.seconds), "--warmup", str(args.warmup),
        ]  # fmt: skip
        if reply:
            argv.append("--reply")
        children.append(
            await asyncio.create_subprocess_exec(
                *argv, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
            )
        )
    claims = []
    for proc in children:
        assert proc.stdout is not None
        claims.append(json.loads(await proc.stdout.readline())["ready"])
    worker_cpu = Usage([worker_pid])
    sampler = asyncio.ensure_future(worker_cpu.sample())
    for proc in children:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
    measured = time.time() + args.warmup
    results = []
    for proc in children:
        assert proc.stdout is not None
        results.append(json.loads(await proc.stdout.readline()))
        await proc.wait()
    window = (measured, min(time.time(), measured + args.seconds))
    sampler.cancel()
    fleet = sum(r["events"] for r in results)  # one verdict per event
    print(f"{name}: {processes} process(es), {fleet / args.seconds:,.0f} verdicts/s in all")
    for r in results:
        print(
            f"  p{r['index']}: read {r['read']!s:14} records {r['records']:7,} "
            f"({r['records'] / max(fleet, 1):6.1%} of the fleet's)  "
            f"{r['bytes'] / 1024:8,.0f} KiB  CPU {r['cpu']:5.2f} s  "
            f"wait p50 {pct(r['waits'], 50):5.1f} p99 {pct(r['waits'], 99):6.1f} ms  "
            f"timeouts {r['timeouts']}"
        )
    waits = [w for r in results for w in r["waits"]]
    print(
        f"  all: wait p50 {pct(waits, 50):.1f} p99 {pct(waits, 99):.1f} ms over {len(waits)} "
        f"waits; records {sum(r['records'] for r in results):,}; "
        f"CPU {sum(r['cpu'] for r in results):.2f} s"
    )
    try:
        cores, busy, steal = worker_cpu.cores(*window)
        print(f"  worker {cores:.2f} cores; {machine_load(busy, steal)}")
    except ValueError as exc:
        print(f"  CPU: {exc}")


async def parent(args: argparse.Namespace) -> None:
    prefix = f"bench-fanout-{uuid.uuid4().hex[:8]}"
    env = worker_env(args.bootstrap, prefix, args.partitions)
    env["LOOPWATCH_VERDICT_PARTITIONS"] = str(args.verdict_partitions)
    settings = Settings.from_env(env)
    await create_topics(settings)
    child_env = {**os.environ, **env}
    with tempfile.TemporaryDirectory(prefix="loopwatch-bench-") as tmp:
        worker = await start_worker(settings, Path(tmp) / "worker.log", 120.0)
        try:
            print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            rounds = [
                ("single (today's client)", 1, False),
                ("fan-out, all partitions (today)", args.processes, False),
                ("fan-out, reply partitions", args.processes, True),
            ]
            for name, processes, reply in rounds:
                await run_round(
                    name, processes, reply, args=args, env=child_env, worker_pid=worker.pid or 0
                )
            print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        finally:
            code = await asyncio.to_thread(worker.stop)
            if code != 0:
                print(f"the worker exited with {code}; log: {worker.log_path}")
            await delete_topics(settings, prefix)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    )
    parser.add_argument("--partitions", type=int, default=4, help="events topic")
    parser.add_argument("--verdict-partitions", type=int, default=16)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0, help="measured, per round")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rate", type=float, default=400.0, help="paced events/s in all")
    parser.add_argument("--sessions", type=int, default=160, help="paced agents in all")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--reply", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.steps = STEPS
    if args.child:
        asyncio.run(child(args))
        return 0
    print(f"fanout_bench  {time.strftime('%Y-%m-%d %H:%M %Z')}  {machine()}")
    asyncio.run(parent(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
