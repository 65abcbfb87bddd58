"""Benchmark of `loopwatch worker` on a real broker. Prints figures.

    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 .venv/bin/python ops/bench/worker_bench.py \
        [--events 50000] [--sessions 200] [--rate 1000] [--seconds 20] [--profile]

* sustained: `--events` synthetic events (ops/bench/synth.py) are produced first; then,
  each with a consumer group of its own, a bare faust agent (ops/bench/bare_agent.py:
  reads the records, nothing else) and one worker read them. Figures: events / (last -
  first) (verdict produce times for the workers), and over the middle 80% of the events
  (leaves out start-up); the worker as a share of the bare agent. Then one worker and
  two worker processes of one app each start on an empty topic of their own, and the
  same events are produced into it once they hold its partitions (`/ready`): their
  rates from then (or the 10th percentile) to the 90th percentile, and two workers as a
  multiple of one (`--workers 1` skips these runs). With the backlog there from the
  start, the first worker to join took every partition and processed alone for a while,
  and in some runs had done the partitions it then kept: 0.92-1.00x "scale-out" on one
  core. Over each window: the CPU per event and cores of the agent or workers, how many
  of the machine's cores were busy and how many the host took (steal, /proc/stat), and
  the cores of the local broker and of the bench: whether the cores, not the code, were
  the limit. `--repeat N` runs it all N times, alternately, and prints the medians.
* latency: a fresh worker, events produced at `--rate` per second for `--seconds`;
  latency = when a verdict reader got the verdict - the event record's timestamp (same
  host clock); p50/p99 over the paced events, after a 2 s warm-up at 100 events/s.
  The reader runs in a process of its own, as a runtime's would: in the producer's event
  loop, a paced producer sending a request per event delayed the reader's fetches (its
  p99 was 60-67 ms while the worker's own event-to-acknowledgement p99 was 19-23 ms).
  It is positioned at the end of every partition before the paced run starts, so its
  own start-up (metadata, first fetch) is not counted as latency. Also printed: the
  worker's own event-to-verdict-acknowledged histogram (`/metrics`), as bucket bounds.
* --floor: each sustained round also runs the worker without detection
  (ops/bench/detector_floor.py: decode, the session's record read and written back, a
  fixed verdict): the share of the bare agent the Kafka and table layers reach alone,
  and the real worker's share of that.
* --profile: the sustained run under cProfile; prints the top functions.
* --py-spy OUT: the one-worker sustained run sampled by py-spy (200 Hz, collapsed
  stacks written to OUT; `pip install py-spy` into the venv first). cProfile's per-call
  overhead inflates the many small calls of the detector several times over.
Each run uses topics and an app id of its own. Targets (issue 4): >= 5,000 events/s
sustained; p99 <= 50 ms at 1,000 events/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from harness import (  # noqa: E402
    Usage,
    bucket_quantiles,
    collect,
    delete_run_topics,
    drop_app_topics,
    event_times,
    middle_window,
    new_prefix,
    produce_all,
    produce_batched,
    produce_paced,
    records,
    run_bare_agent,
    settled_at,
    span_rates,
    start_worker,
    stop_worker,
    worker_env,
    worker_histogram,
)

from loopwatch.streams.kafka.admin import create_topics, delete_topics  # noqa: E402
from loopwatch.streams.settings import Settings  # noqa: E402


async def run_workers(
    args: argparse.Namespace,
    env: dict[str, str],
    workers: int,
    workdir: Path,
    count: int,
    *,
    late: list[tuple[bytes, bytes]] | None = None,
    tree: Path | None = None,
    module: str | None = None,
) -> tuple[list[float], Usage, float]:
    """`workers` worker processes of one app over the backlog; their verdicts' times, the
    CPU they and the machine used, and when the backlog was all there. The app's topics
    are deleted once they stop (`drop_app_topics`).

    `late`: the workers' events topic starts empty, and `late` is produced into it once
    they hold all its partitions between them (`settled_at`). On a backlog that is there
    from the start, the first worker to join takes every partition and processes for a
    while alone, and partitions move while the second joins: that says nothing about
    scale-out."""
    profile = workdir / "worker.prof" if args.profile and workers == 1 else None
    sampled = Path(args.py_spy).resolve() if args.py_spy and workers == 1 else None
    procs = []  # the workers
    for n in range(workers):
        own = dict(env)
        own["LOOPWATCH_WEB_PORT"] = str(int(env["LOOPWATCH_WEB_PORT"]) + n)
        own["LOOPWATCH_DATA_DIR"] = f"{env['LOOPWATCH_DATA_DIR']}-{n}"
        log = workdir / f"sustained-{workers}-{n}.log"
        where = {"tree": tree} if tree else {}
        procs.append(start_worker(own, log, profile, sampled, module=module, **where))
    usage = Usage([proc.pid or 0 for proc in procs], args.bootstrap)
    sampler = asyncio.ensure_future(usage.sample())
    there = time.time()
    try:
        if late is not None:
            await settled_at(procs, args.partitions, deadline=120)
            await produce_batched(
                args.bootstrap, env["LOOPWATCH_EVENTS_TOPIC"], late, args.partitions
            )
            there = time.time()
        got = await collect(
            args.bootstrap,
            env["LOOPWATCH_VERDICTS_TOPIC"],
            args.partitions,
            count,
            deadline=600,
            patient=True,
        )
    finally:
        sampler.cancel()
        for proc in procs:
            stop_worker(proc)
        await drop_app_topics(env)
    if profile is not None:
        print("profile (top 25 by cumulative time, worker process):")
        pstats.Stats(str(profile)).sort_stats("cumulative").print_stats(25)
        pstats.Stats(str(profile)).sort_stats("tottime").print_stats(25)
    return [record.timestamp / 1000 for _, record in got], usage, there  # produce times


async def compare_trees(args: argparse.Namespace, workdir: Path) -> None:
    """One worker from each of `--tree` in turn (A, B, A, B, ...: `--rounds`), each with
    an app (group, changelog, verdicts) of its own over the same backlog: the code of
    two commits under the same input and the same load."""
    prefix = new_prefix()
    settings = Settings.from_env(worker_env(args.bootstrap, prefix, args.partitions))
    await create_topics(settings)
    data = records(args.events, args.sessions, seed=7)
    await produce_all(args.bootstrap, settings.events_topic, data)
    trees = [Path(tree).resolve() for tree in args.tree]
    rates: dict[Path, list[float]] = {tree: [] for tree in trees}
    cpus: dict[Path, list[float]] = {tree: [] for tree in trees}
    print(f"trees: {len(data)} events backlog, {args.partitions} partitions")
    try:
        for round_ in range(args.rounds):
            for tree in trees:
                app = f"{prefix}-{uuid.uuid4().hex[:6]}"
                env = worker_env(args.bootstrap, app, args.partitions)
                env["LOOPWATCH_EVENTS_TOPIC"] = settings.events_topic
                await create_topics(Settings.from_env(env))
                load = os.getloadavg()[0]
                proc = start_worker(env, workdir / f"tree-{round_}.log", None, tree=tree)
                usage = Usage([proc.pid or 0], args.bootstrap)
                sampler = asyncio.ensure_future(usage.sample())
                try:
                    got = await collect(
                        args.bootstrap, env["LOOPWATCH_VERDICTS_TOPIC"], args.partitions,
                        len(data), deadline=600, patient=True,
                    )  # fmt: skip
                finally:
                    sampler.cancel()
                    stop_worker(proc)
                await drop_app_topics(env)
                stamps = sorted(record.timestamp / 1000 for _, record in got)
                whole, middle = span_rates(stamps)
                per_event = usage.cpu_per_event(*middle_window(stamps), len(stamps) * 0.8)
                rates[tree].append(whole)
                cpus[tree].append(per_event)
                print(
                    f"  round {round_ + 1} {tree.name}: {whole:8,.0f} events/s "
                    f"(middle 80%: {middle:,.0f}; worker CPU {per_event:,.0f} us/event)  "
                    f"load {load:.2f}",
                    flush=True,
                )
    finally:
        await delete_topics(settings, prefix)
    for tree, figures in rates.items():
        print(
            f"  {tree.name}: median {statistics.median(figures):,.0f} events/s "
            f"({', '.join(f'{x:,.0f}' for x in figures)}), "
            f"CPU {statistics.median(cpus[tree]):,.0f} us/event "
            f"({', '.join(f'{x:,.0f}' for x in cpus[tree])})"
        )


async def sustained(args: argparse.Namespace, workdir: Path) -> None:
    """The backlog, read by a bare faust agent, one worker, then two workers (each with
    a group of its own), in this order, in one run; `--repeat N` runs that sequence N
    times over the same backlog and prints the median ratios: the machine's speed drifts
    from one minute to the next, so one bare run against one worker run says little."""
    prefix = new_prefix()
    env = worker_env(args.bootstrap, prefix, args.partitions)
    await create_topics(Settings.from_env(env))
    data = records(args.events, args.sessions, seed=7)
    events = env["LOOPWATCH_EVENTS_TOPIC"]
    await produce_all(args.bootstrap, events, data)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"sustained: {len(data)} events backlog, {args.partitions} partitions, load {load}")
    shares: list[float] = []
    floors: list[float] = []
    scale_outs: list[float] = []
    for round_ in range(args.repeat):
        if args.repeat > 1:
            print(f" round {round_ + 1} of {args.repeat}")
        share, scale_out, floor = await sustained_round(args, workdir, events, data)
        shares.append(share)
        if floor is not None:
            floors.append(floor)
        if scale_out is not None:
            scale_outs.append(scale_out)
    if args.repeat > 1:
        print(f"  over {args.repeat} rounds: one worker {_median_share(shares)}")
        if floors:
            print(f"  without detection: {_median_share(floors)}")
        if scale_outs:
            listed = ", ".join(f"{x:.2f}x" for x in scale_outs)
            print(f"  two workers {statistics.median(scale_outs):.2f}x one (median; {listed})")
    print(f"  load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _median_share(shares: list[float]) -> str:
    listed = ", ".join(f"{share:.0%}" for share in shares)
    return f"{statistics.median(shares):.0%} of the bare agent (median; {listed})"


async def sustained_round(
    args: argparse.Namespace,
    workdir: Path,
    events_topic: str,
    data: list[tuple[bytes, bytes]],
) -> tuple[float, float | None, float | None]:
    """One bare agent and one worker over `events_topic` (holding `data`) (`--floor`: and
    the worker without detection, ops/bench/detector_floor.py), then (unless `--workers
    1`) one and two workers over `data` produced into a topic of their own once they hold
    its partitions; each with a group, changelog and verdicts of its own. Returns the
    worker's share of the bare agent (whole runs), two workers' multiple of one (both
    over the late events), and the share of the worker without detection."""
    count = len(data)
    marks, bare_usage = await run_bare_agent(args.bootstrap, events_topic, count, workdir)
    bare_whole = count / max(1e-9, marks["last"] - marks["first"])
    bare_middle = (count * 0.8) / max(1e-9, marks["p90"] - marks["p10"])
    print(f"  bare faust agent:  {bare_whole:8,.0f} events/s  (middle 80%: {bare_middle:,.0f})")
    print(f"    middle 80%: {bare_usage.between(marks['p10'], marks['p90'], count * 0.8)}")
    if args.decode_only:
        plain, plain_usage = await run_bare_agent(
            args.bootstrap, events_topic, count, workdir, "decode_only.py"
        )
        plain_whole = count / max(1e-9, plain["last"] - plain["first"])
        plain_middle = (count * 0.8) / max(1e-9, plain["p90"] - plain["p10"])
        print(
            f"  aiokafka, decode:  {plain_whole:8,.0f} events/s  (middle 80%: "
            f"{plain_middle:,.0f})  {plain_middle / bare_middle:.2f}x the bare agent"
        )
        print(f"    middle 80%: {plain_usage.between(plain['p10'], plain['p90'], count * 0.8)}")

    one_whole = 0.0
    floor_share = None
    for label, tree, extra, module in _variants(args):
        env = {**await app_env(args, events_topic), **extra}
        one, one_usage, _ = await run_workers(
            args, env, 1, workdir, count, tree=tree, module=module
        )
        whole, middle = span_rates(one)
        note = ""
        if module == FLOOR_MODULE:
            floor_share = whole / bare_whole
            note = f"; the worker {one_whole / whole:.0%} of it"
        else:
            one_whole = one_whole or whole
        name = f"{label}:"
        print(
            f"  {name:<19}{whole:8,.0f} events/s  (middle 80%: {middle:,.0f})  "
            f"{whole / bare_whole:.0%} of the bare agent ({middle / bare_middle:.2f}x){note}"
        )
        print(f"    middle 80%: {one_usage.between(*middle_window(one), len(one) * 0.8)}")
    if args.workers < 2:
        return one_whole / bare_whole, None, floor_share
    # One, then two workers, each of an app of its own over the same events produced into
    # a topic of its own once the workers have its partitions: both measured the same
    # way, from then (or the 10th percentile, if later) to the 90th percentile.
    rates = []
    for workers in (1, 2):
        env = await app_env(args, None)
        stamps, usage, there = await run_workers(args, env, workers, workdir, count, late=data)
        low, high = middle_window(stamps)
        start = max(there, low)
        inside = sum(1 for stamp in stamps if start <= stamp <= high)
        if high - start <= 0 or inside < count // 10:
            print(f"  {workers} worker(s): too few verdicts after the events were produced")
            return one_whole / bare_whole, None, floor_share
        rates.append(inside / (high - start))
        label = "one worker, late:" if workers == 1 else "two workers, late:"
        times = "" if workers == 1 else f"  {rates[1] / rates[0]:.2f}x one worker, late"
        print(f"  {label:<19}{rates[-1]:8,.0f} events/s  ({inside:,} events){times}")
        print(f"    same span: {usage.between(start, high, inside)}")
    return one_whole / bare_whole, rates[1] / rates[0], floor_share


FLOOR_MODULE = "detector_floor"
"""`--floor`'s worker: ops/bench/detector_floor.py."""


def _variants(
    args: argparse.Namespace,
) -> list[tuple[str, Path | None, dict[str, str], str | None]]:
    """The one-worker runs of a round: `--variant LABEL=TREE[:VAR=VALUE,...]` each (a
    checkout and settings of its own), or this checkout as it is; then, with `--floor`,
    the worker without detection. Each with the module it runs (None: the CLI)."""
    out: list[tuple[str, Path | None, dict[str, str], str | None]] = []
    for spec in args.variant:
        label, _, rest = spec.partition("=")
        tree, _, settings = rest.partition(":")
        extra = dict(item.split("=", 1) for item in settings.split(",") if item)
        out.append((label, Path(tree or ".").resolve(), extra, None))
    if not out:
        out.append(("one worker", None, {}, None))
    if args.floor:
        out.append(("without detection", None, {}, FLOOR_MODULE))
    return out


async def app_env(args: argparse.Namespace, events_topic: str | None) -> dict[str, str]:
    """The environment of a worker app of its own (group, changelog, verdicts and the
    other topics, created here) that reads `events_topic` (None: a new one of its own)."""
    env = worker_env(args.bootstrap, new_prefix(), args.partitions)
    if events_topic is not None:
        env["LOOPWATCH_EVENTS_TOPIC"] = events_topic
    await create_topics(Settings.from_env(env))
    return env


def _reader_process(
    bootstrap: str, topic: str, partitions: int, count: int, *, ready: Any, out: Any
) -> None:
    """Child process: read `count` verdicts from the end of `topic`; send back
    (receive time, session_id, seq) of each."""

    async def run() -> list[tuple[float, str, int]]:
        flag = asyncio.Event()
        task = asyncio.create_task(
            collect(bootstrap, topic, partitions, count, deadline=300, ready=flag)
        )
        await flag.wait()
        ready.set()
        got = await task
        out_rows = []
        for received, record in got:
            verdict = json.loads(record.value)
            out_rows.append((received, verdict["session_id"], verdict["seq"]))
        return out_rows

    out.send(asyncio.run(run()))
    out.close()


async def latency(args: argparse.Namespace, workdir: Path) -> None:
    prefix = new_prefix()
    env = worker_env(args.bootstrap, prefix, args.partitions)
    await create_topics(Settings.from_env(env))
    events, verdicts = env["LOOPWATCH_EVENTS_TOPIC"], env["LOOPWATCH_VERDICTS_TOPIC"]
    count = int(args.rate * args.seconds)
    data = records(count, args.sessions, seed=8)
    proc = start_worker(env, workdir / "latency.log", None)
    spawn = multiprocessing.get_context("spawn")
    try:
        # Warm-up traffic into the same topic first, so the group is joined and recovered.
        # Then 2 s at the measured rate, so the figures are the steady state's (without
        # it, the first second at 1,000 events/s had a p99 of ~115 ms, the rest 12-38 ms).
        warm = records(int(2 * args.rate), 50, seed=9)
        await produce_paced(args.bootstrap, events, warm[:200], rate=100)
        await produce_paced(args.bootstrap, events, warm[200:], rate=args.rate)
        await collect(args.bootstrap, verdicts, args.partitions, len(warm), deadline=120)
        worker_before = await asyncio.to_thread(worker_histogram, env)
        ready = spawn.Event()
        receive, send = spawn.Pipe(duplex=False)
        reader = spawn.Process(
            target=_reader_process,
            args=(args.bootstrap, verdicts, args.partitions, count),
            kwargs={"ready": ready, "out": send},
        )
        reader.start()
        if not await asyncio.to_thread(ready.wait, 60):
            raise RuntimeError("the verdict reader did not get ready within 60 s")
        await produce_paced(args.bootstrap, events, data, rate=args.rate)
        if not await asyncio.to_thread(receive.poll, 300):
            raise RuntimeError("the verdict reader sent nothing within 300 s")
        got = receive.recv()
        reader.join(timeout=30)
        worker_after = await asyncio.to_thread(worker_histogram, env)
    finally:
        stop_worker(proc)
    # Latency of each verdict: receive time - the produce time of its event, found by
    # (session_id, seq) in the events we sent (event record timestamps ≈ send time).
    sent_at = await event_times(args.bootstrap, events)
    lat = []
    by_second: dict[int, list[float]] = {}
    start = min(sent_at.values())
    for received, session_id, seq in got:
        key = (session_id, seq)
        if key in sent_at:
            lat.append((received - sent_at[key]) * 1000)
            by_second.setdefault(int(sent_at[key] - start), []).append(lat[-1])
    lat.sort()
    q = statistics.quantiles(lat, n=100)
    print(
        f"latency at {args.rate:,.0f} events/s for {args.seconds} s ({len(lat)} events): "
        f"p50 {q[49]:.1f} ms, p90 {q[89]:.1f} ms, p99 {q[98]:.1f} ms, max {lat[-1]:.1f} ms"
    )
    print(
        "p99 by second of the run (ms): "
        + " ".join(
            f"{max(v) if len(v) < 100 else sorted(v)[int(len(v) * 0.99)]:.0f}"
            for _, v in sorted(by_second.items())
        )
    )
    in_worker = {b: worker_after[b] - worker_before.get(b, 0.0) for b in worker_after}
    print(f"worker's own event-to-verdict-acknowledged: {bucket_quantiles(in_worker)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    )
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--py-spy",
        metavar="OUT",
        help="sample the one-worker run with py-spy (installed in the venv) into OUT "
        "(collapsed stacks)",
    )
    parser.add_argument("--workers", type=int, default=2, help="1: skip the two-worker run")
    parser.add_argument("--only", choices=("sustained", "latency"))
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        help="compare the worker of these checkouts (give two or more), alternately",
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --tree: runs per tree")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="sustained: a one-worker run LABEL=TREE[:VAR=VALUE,...] (repeatable), e.g. "
        "before=/work/main after=.:LOOPWATCH_BATCH_HAND_OFF=true",
    )
    parser.add_argument(
        "--decode-only",
        action="store_true",
        help="sustained: also a plain aiokafka consumer that only decodes (decode_only.py)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="sustained: also the worker without detection (detector_floor.py): what the "
        "Kafka and table layers cost alone",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="sustained: run the bare agent, one and two workers this many times, alternately",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loopwatch-bench-") as tmp:
        try:
            if args.tree:
                asyncio.run(compare_trees(args, Path(tmp)))
                return 0
            if args.only in (None, "sustained"):
                asyncio.run(sustained(args, Path(tmp)))
            if args.only in (None, "latency"):
                asyncio.run(latency(args, Path(tmp)))
        finally:
            asyncio.run(delete_run_topics(args.bootstrap, args.partitions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
