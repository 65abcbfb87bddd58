"""`loopwatch demo`: broker, topics, a worker and a simulated fleet, from one command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from streams.commands.dashboard import DEFAULT_PORT as DEFAULT_DASHBOARD_PORT
from streams.commands.dashboard import port_number
from streams.demo.broker import BrokerError, ensure_broker
from streams.demo.fleet import Fleet, FleetSummary
from streams.demo.page import DemoPage
from streams.demo.worker_process import WorkerFailed, WorkerProcess, free_port
from streams.kafka_admin import BrokerUnreachable, TopicError, create_topics
from streams.settings import Settings, SettingsError

SHARED_TRAJECTORIES = Path(__file__).resolve().parents[3] / "shared" / "data" / "trajectories"
"""Recorded real sessions beside the project on development machines and in CI."""


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "demo",
        help="the live demo: a worker and a simulated agent fleet (no model, no network)",
        description="Use KAFKA_BOOTSTRAP_SERVERS or start the local broker, create the "
        "topics, start `loopwatch worker`, then run simulated agents: some replay recorded "
        "sessions, some fall into each loop kind and change approach once the warning "
        "reaches their prompt. Prints each warning as it is placed, then a summary.",
    )
    parser.add_argument(
        "--keep-worker", action="store_true", help="leave the worker (and broker) running"
    )
    parser.add_argument(
        "--trajectories",
        type=Path,
        default=SHARED_TRAJECTORIES,
        help="also replay the *.jsonl event files here, when the folder exists "
        "(default: ../shared/data/trajectories)",
    )
    parser.add_argument(
        "--max-sessions-per-file",
        type=int,
        default=None,
        help="replay at most this many sessions of each trajectory file",
    )
    parser.add_argument(
        "--verdict-timeout", type=float, default=5.0, help="seconds a verdict wait may take"
    )
    parser.add_argument(
        "--dashboard-port",
        type=dashboard_port,
        default=DEFAULT_DASHBOARD_PORT,
        help=f"serve the live fleet page on this port (default {DEFAULT_DASHBOARD_PORT}; "
        "0: no page)",
    )
    parser.add_argument(
        "--keep-dashboard",
        action="store_true",
        help="after the run, keep serving the fleet page until Ctrl-C (make run does)",
    )
    parser.set_defaults(handler=run)


def dashboard_port(raw: str) -> int:
    return 0 if raw.strip() == "0" else port_number(raw)


def run(args: argparse.Namespace) -> int:
    # aiokafka warns of each retried produce while a fresh broker elects partition
    # leaders; it retries by itself, and the demo's own output says what matters.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    try:
        return asyncio.run(_demo(args))
    except (BrokerError, SettingsError, BrokerUnreachable, TopicError, WorkerFailed) as exc:
        print(f"loopwatch demo: {exc}", file=sys.stderr)
        return 1


async def _demo(args: argparse.Namespace) -> int:
    broker = await asyncio.to_thread(ensure_broker)
    workdir = Path(tempfile.mkdtemp(prefix="loopwatch-demo-"))
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "LOOPWATCH_DATA_DIR": str(workdir / "data"),
        "LOOPWATCH_WEB_PORT": str(free_port()),
    }
    settings = Settings.from_env({**env, **_configured()})
    worker = WorkerProcess(settings, workdir / "worker.log")
    keep = False
    page = DemoPage(settings, args.dashboard_port)
    try:
        for topic in await create_topics(settings):
            print(f"topic {topic.name}: {'created' if topic.created else 'exists'}")
        started = time.monotonic()
        worker.start()
        await worker.wait_ready(timeout=120)
        print(
            f"worker pid {worker.pid} ready in {time.monotonic() - started:.1f}s "
            f"(log: {worker.log_path}, metrics: http://{settings.web_host}:{settings.web_port}"
            "/metrics)"
        )
        await page.start()
        trajectories = args.trajectories if args.trajectories.is_dir() else None
        if trajectories is not None:
            print(f"also replaying the recorded sessions in {trajectories}")
        fleet = Fleet(
            settings,
            trajectories=trajectories,
            trajectory_limit=args.max_sessions_per_file,
            verdict_timeout=args.verdict_timeout,
        )
        summary = await fleet.run()
        _print_summary(summary)
        keep = args.keep_worker
        if args.keep_dashboard:
            await page.serve_until_interrupted()
    finally:
        await page.stop()
        if keep:
            print(f"worker left running: pid {worker.pid} (stop it with kill {worker.pid})")
            if broker.leased:
                print("local broker left running (stop it with make kafka-down)")
            worker.detach()
        else:
            code = await asyncio.to_thread(worker.stop)
            print(f"worker stopped (exit code {code})")
            await asyncio.to_thread(broker.release)
    return 0 if summary.loops_broken == summary.loops and not summary.clean_sessions_warned else 1


def _configured() -> dict[str, str]:
    # The user's LOOPWATCH_* / KAFKA_* settings win over the demo's defaults.
    return {k: v for k, v in os.environ.items() if k.startswith(("LOOPWATCH_", "KAFKA_"))}


def _print_summary(summary: FleetSummary) -> None:
    print("\nloopwatch demo summary")
    for line in summary.lines():
        print(f"  {line}")
