"""The wait an agent runtime pays before each model call, through the public client API.

    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 .venv/bin/python ops/bench/client_wait_bench.py \
        [--only paced|closed] [--seconds 15] [--rate 1000] [--sessions 500] \
        [--closed-sessions 32] [--steps 10] [--linger-ms N] [--no-floor] [--rounds 1] \
        [--worker-env VAR=VALUE ...]

One `loopwatch worker` child (topics and app id of its own, 12 partitions) and one
`LoopwatchClient`, used only as a runtime uses it: `open_session`, publish, `verdicts()`.
Each simulated agent runs sessions of `--steps` steps that end and are replaced by a new
session, as in a real fleet: a user message, then per step the wait for the verdicts of
the newest event (a model call follows; paced agents spend their interval there), an
assistant message with one tool call and its result; a last wait, then `session_end`.
Tool calls repeat now and then, so warnings happen.

* paced: `--sessions` agents stepping at a fixed interval, for `--rate` events/s in all;
  they start spread over one interval, so sessions open and close continuously.
* closed: `--closed-sessions` agents, each stepping again as soon as its wait returns.

Waits during the first `--warmup` seconds are not counted. Printed per load: the wait
(`verdicts()` call to return) p50/p90/p99/max, timeouts, events/s, the p99 of each
second (median, best and worst: one stall is one bad second), and where the time
went for each answered wait (`VerdictWait.timeline`): publish ack, publish to evaluation,
linger (evaluation to the verdict's batch), to receipt (batch to this client's reader), to
return (reader to the caller), and publish to return. Then the CPU over the measured
seconds: the worker's per event and in cores, this bench process's cores (the simulated
agents and the client), the machine's busy cores, and the cores the host took from this
virtual machine (steal): with the broker on the same 2-core machine, a tail is often a
queue for a core, and steal decides most of the run-to-run spread (docs/performance.md);
and the local broker's GC pauses in those seconds, from the log `ops/kafka/kafka.sh` has
it write.

The floor: after each load against the worker, the same load (the same clients, the same
waits) against `echo_worker.py`, a bare aiokafka consumer and producer (no faust, no
detection) that answers each event with a fixed verdict on a verdicts topic of its own.
What the client waits for there is the broker's and the clients' part of the wait; the
worker's p50 and p99 are printed as a ratio of the floor's, which is what a run on a busy
2-core machine can compare (absolute waits swing several-fold with what else runs).
`--rounds N` alternates the two N times per load (worker, floor, worker, floor, ...), so
a change in what else runs lands on both; it prints each round's ratios and their
median. `--worker-env VAR=VALUE` starts the worker with a setting of its own (e.g.
`LOOPWATCH_BATCH_HAND_OFF=false` for the per-record loop).
Benchmarks print; tests never time.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from core_bench import machine  # noqa: E402
from harness import Usage, broker_pauses, machine_load, worker_env  # noqa: E402

from loopwatch.streams.client import Call, LoopwatchClient, VerdictWait  # noqa: E402
from loopwatch.streams.demo.worker_process import start_worker  # noqa: E402
from loopwatch.streams.kafka.admin import create_topics, delete_topics  # noqa: E402
from loopwatch.streams.settings import Settings  # noqa: E402

VERDICT_TIMEOUT = 5.0
SEGMENTS = ("publish_ack", "to_evaluation", "linger", "to_receipt", "to_return", "total")
FILES = [f"src/app/module_{n}.py" for n in range(8)]
BODY = "\n".join(f"    line {n}: value = compute(value, {n})" for n in range(12))


@dataclass
class Load:
    name: str
    agents: int
    interval: float | None
    """Seconds between two model calls of one agent (None: closed loop)."""
    waited: list[float] = field(default_factory=list)
    """Each counted wait's seconds, and below its segments: floats only, not the waits
    themselves. Keeping ~18,000 `VerdictWait`s (with their warnings) made this process's
    full garbage collections take 25-90 ms each, stalls that every agent here waited
    through: the closed loop's max wait was 122-147 ms with them, 54-61 ms without
    (docs/performance.md)."""
    segments: dict[str, list[float]] = field(default_factory=dict)
    """Empty when the client reported no timeline (a timeline always has `total`)."""
    returned: list[float] = field(default_factory=list)
    """When each counted wait returned (monotonic seconds), for the windows' p99."""
    timeouts: int = 0
    events: int = 0
    counting_since: float = 0.0
    counting_until: float = 0.0

    def record(self, wait: VerdictWait) -> None:
        self.waited.append(wait.waited_seconds)
        self.returned.append(time.monotonic())
        self.timeouts += not wait.complete
        if wait.timeline is None:
            return
        for name, value in wait.timeline.segments().items():
            if value is not None:
                self.segments.setdefault(name, []).append(value)


async def agent(
    client: LoopwatchClient, load: Load, index: int, *, steps: int, start: float, stop: float
) -> None:
    rng = random.Random(index)
    next_tick = start + (0 if load.interval is None else load.interval * index / load.agents)
    generation = 0
    while time.monotonic() < stop:
        sid = f"{load.name}-{index}-{generation}-{uuid.uuid4().hex[:6]}"
        generation += 1
        async with await client.open_session(sid) as session:
            await session.user("please fix the failing test", message_index=0)
            load.events += 1
            path = rng.choice(FILES)
            for step in range(steps + 1):
                # the wait right after the newest event, as before a model call
                counted = time.monotonic() >= load.counting_since
                wait = await session.verdicts()
                if counted:
                    load.record(wait)
                if step == steps or time.monotonic() >= stop:
                    break
                if load.interval is not None:  # the model call and the tool run: pacing
                    await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
                    next_tick += load.interval
                if rng.random() < 0.3:  # now and then the agent moves on to another file
                    path = rng.choice(FILES)
                call_id = f"call-{step}"
                offset = rng.choice((0, 0, 40))
                arguments = {"path": path, "offset": offset, "limit": 40}
                await session.assistant(
                    None, [Call(call_id, "read_file", arguments)], message_index=2 * step + 1
                )
                await session.tool_result(
                    call_id, "read_file", {"content": BODY, "offset": offset}, None
                )
                load.events += 2
        load.events += 1  # session_end


def quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    ordered = sorted(values)
    q = statistics.quantiles(ordered, n=100)
    return (
        f"p50 {q[49] * 1000:6.1f}  p90 {q[89] * 1000:6.1f}  p99 {q[98] * 1000:6.1f}  "
        f"max {ordered[-1] * 1000:6.1f} ms"
    )


WINDOW_SECONDS = 1.0


def window_p99s(load: Load) -> list[float]:
    """The wait p99 of each whole `WINDOW_SECONDS` of the measured time (by when the waits
    returned): one stall shows as one bad window, a slow run as all of them."""
    by_window: dict[int, list[float]] = {}
    for waited, returned in zip(load.waited, load.returned, strict=True):
        index = int((returned - load.counting_since) // WINDOW_SECONDS)
        by_window.setdefault(index, []).append(waited)
    whole = int((load.counting_until - load.counting_since) // WINDOW_SECONDS)
    return [
        statistics.quantiles(values, n=100)[98]
        for index, values in sorted(by_window.items())
        if index < whole and len(values) >= 2  # not the waits that ended after the stop
    ]


def p50_p99(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(sorted(values), n=100)
    return q[49], q[98]


def report_floor(worker: Load, floor: Load) -> tuple[float, float] | None:
    """The worker's wait as a ratio of the echo floor's, measured just after it: printed,
    and returned as (p50 ratio, p99 ratio)."""
    if len(worker.waited) < 2 or len(floor.waited) < 2:
        print("  against the floor: n/a")
        return None
    (w50, w99), (f50, f99) = p50_p99(worker.waited), p50_p99(floor.waited)
    print(
        f"{worker.name} against the echo floor: p50 {w50 * 1000:.1f} / {f50 * 1000:.1f} ms "
        f"= {w50 / f50:.2f}x, p99 {w99 * 1000:.1f} / {f99 * 1000:.1f} ms = {w99 / f99:.2f}x"
    )
    return w50 / f50, w99 / f99


def report_rounds(name: str, ratios: list[tuple[float, float]]) -> None:
    """Each round's ratios against the floor, and their median (`--rounds` > 1)."""
    if len(ratios) < 2:
        return
    p50s, p99s = [r[0] for r in ratios], [r[1] for r in ratios]
    print(
        f"{name}, {len(ratios)} rounds against the echo floor: "
        f"p50 {' '.join(f'{x:.2f}x' for x in p50s)} (median {statistics.median(p50s):.2f}x), "
        f"p99 {' '.join(f'{x:.2f}x' for x in p99s)} (median {statistics.median(p99s):.2f}x)"
    )


class EchoWorker:
    """`echo_worker.py` in a child process, on the topics of `settings`."""

    def __init__(self, settings: Settings, bootstrap: str) -> None:
        script = Path(__file__).resolve().with_name("echo_worker.py")
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(script),
                bootstrap,
                settings.events_topic,
                settings.verdicts_topic,
                f"{settings.app_id}-echo",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = self.process.pid

    async def ready(self, timeout: float) -> None:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.process.stdout.readline), timeout)
        if line.strip() != "ready":
            raise RuntimeError(f"the echo worker did not start (exit {self.process.poll()})")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def report_cpu(
    load: Load, seconds: float, worker: Usage, bench: Usage, window: tuple[float, float]
) -> None:
    """The CPU over the measured window (wall-clock `window`); the events in it are
    estimated from the run's average rate."""
    start, end = window
    try:
        per_event = worker.cpu_per_event(start, end, load.events / seconds * (end - start))
        worker_cores, _, _ = worker.cores(start, end)
        bench_cores, busy, steal = bench.cores(start, end)
    except ValueError as exc:
        print(f"  CPU: {exc}")
        return
    print(
        f"  CPU: worker {per_event:,.0f} us/event, {worker_cores:.2f} cores; this bench "
        f"{bench_cores:.2f} cores; {machine_load(busy, steal)}"
    )


def report(load: Load, seconds: float) -> None:
    print(
        f"{load.name}: {load.agents} agents, {len(load.waited)} waits, {load.timeouts} timeouts, "
        f"{load.events / seconds:,.0f} events/s over {seconds:.0f} s (warm-up included)"
    )
    print(f"  wait (verdicts() call to return)   {quantiles(load.waited)}")
    if windows := window_p99s(load):
        middle = statistics.median(windows)
        print(
            f"  p99 of each {WINDOW_SECONDS:.0f} s window: median {middle * 1000:.1f}, best "
            f"{min(windows) * 1000:.1f}, worst {max(windows) * 1000:.1f} ms "
            f"({len(windows)} windows; {sum(w <= middle for w in windows)} at or below the median)"
        )
    if not load.segments:
        print("  segments: this client reports no timeline")
        return
    for name in SEGMENTS:
        values = load.segments.get(name, [])
        print(f"  {name:14} {len(values):6} waits      {quantiles(values)}")


async def run_load(
    client: LoopwatchClient, load: Load, args: argparse.Namespace
) -> tuple[Load, float]:
    start = time.monotonic()
    load.counting_since = start + args.warmup
    stop = load.counting_until = load.counting_since + args.seconds
    await asyncio.gather(
        *(
            agent(client, load, i, steps=args.steps, start=start, stop=stop)
            for i in range(load.agents)
        )
    )
    return load, time.monotonic() - start


async def measure(load: Load, settings: Settings, pid: int, args: argparse.Namespace) -> None:
    """Run `load` with clients of `settings`' topics; print its wait, CPU (`pid`: the
    worker's process) and the broker's pauses."""
    worker_cpu, bench_cpu = Usage([pid]), Usage([os.getpid()])
    samplers = [asyncio.ensure_future(u.sample()) for u in (worker_cpu, bench_cpu)]
    async with LoopwatchClient.from_settings(
        settings, verdict_timeout=VERDICT_TIMEOUT, log_timeouts=False
    ) as client:
        await client.connect()  # in the background otherwise: not measured
        if args.gc_freeze:  # as a runtime would, once it has started
            gc.freeze()
        measured = time.time() + args.warmup
        done, seconds = await run_load(client, load, args)
        window = (measured, min(time.time(), measured + args.seconds))
    for sampler in samplers:
        sampler.cancel()
    report(done, seconds)
    report_cpu(done, seconds, worker_cpu, bench_cpu, window)
    if pauses := broker_pauses(args.bootstrap, *window):
        print(f"  {pauses}")


async def main_async(args: argparse.Namespace) -> None:
    prefix = f"bench-wait-{uuid.uuid4().hex[:8]}"
    env = worker_env(args.bootstrap, prefix, args.partitions)
    if args.linger_ms is not None:
        env["LOOPWATCH_OUTPUT_LINGER_MS"] = str(args.linger_ms)
    for assignment in args.worker_env:
        name, sep, value = assignment.partition("=")
        if not sep or not name:
            raise SystemExit(f"--worker-env {assignment!r}: expected VAR=VALUE")
        env[name] = value
    settings = Settings.from_env(env)
    await create_topics(settings)
    floor_settings = Settings.from_env(
        worker_env(args.bootstrap, f"{prefix}-echo", args.partitions)
    )
    if not args.no_floor:
        await create_topics(floor_settings)
    with tempfile.TemporaryDirectory(prefix="loopwatch-bench-") as tmp:
        worker = await start_worker(settings, Path(tmp) / "worker.log", 120.0)
        echo = None
        try:
            if not args.no_floor:
                echo = EchoWorker(floor_settings, args.bootstrap)
                await echo.ready(120.0)
            print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            if args.gc_freeze:
                print("this process freezes its start-up objects (gc.freeze()) per load")
            kinds: list[tuple[str, int, float | None]] = []
            # 2 events per step, plus the user message and session_end of each session
            per_step = 2 + 2 / args.steps
            if args.only in (None, "paced"):
                kinds.append(("paced", args.sessions, args.sessions * per_step / args.rate))
            if args.only in (None, "closed"):
                kinds.append(("closed", args.closed_sessions, None))
            for name, agents, interval in kinds:
                ratios: list[tuple[float, float]] = []
                for round_ in range(1, args.rounds + 1):
                    label = name if args.rounds == 1 else f"{name}, round {round_}"
                    load = Load(label, agents, interval)
                    await measure(load, settings, worker.pid or 0, args)
                    if echo is not None:
                        floor = Load(f"{label} (echo floor)", agents, interval)
                        await measure(floor, floor_settings, echo.pid, args)
                        if ratio := report_floor(load, floor):
                            ratios.append(ratio)
                report_rounds(name, ratios)
            print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        finally:
            if echo is not None:
                echo.stop()
            code = await asyncio.to_thread(worker.stop)
            if code != 0:
                print(f"the worker exited with {code}; log: {worker.log_path}")
            # a long-lived broker with thousands of bench topics answers slower (the
            # floor's topics share the prefix)
            await delete_topics(settings, prefix)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    )
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--only", choices=("paced", "closed"))
    parser.add_argument("--seconds", type=float, default=15.0, help="measured, per load")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="paced events/s")
    parser.add_argument("--sessions", type=int, default=500, help="paced agents")
    parser.add_argument("--closed-sessions", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10, help="tool steps per session")
    parser.add_argument("--linger-ms", type=int, help="the worker's LOOPWATCH_OUTPUT_LINGER_MS")
    parser.add_argument("--no-floor", action="store_true", help="no echo floor")
    parser.add_argument(
        "--rounds", type=int, default=1, help="worker and floor alternated, per load"
    )
    parser.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="VAR=VALUE",
        help="a setting for the worker (repeatable)",
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() in this process once the client has started (docs/client.md)",
    )
    args = parser.parse_args()
    print(f"client_wait_bench  {time.strftime('%Y-%m-%d %H:%M %Z')}  {machine()}")
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
