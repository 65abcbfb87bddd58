"""`loopwatch demo`: broker, topics, a worker and a simulated fleet, from one command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loopwatch.streams.commands.exit_codes import EXIT_KAFKA, EXIT_LOOP_FOUND, EXIT_OK, EXIT_USAGE
from loopwatch.streams.commands.options import (
    bootstrap_servers,
    existing_dir,
    int_at_least,
    port,
    positive_float,
)
from loopwatch.streams.commands.service import missing_worker_extra
from loopwatch.streams.demo.broker import Broker, BrokerError, ensure_broker
from loopwatch.streams.demo.fleet import Fleet, FleetSummary
from loopwatch.streams.demo.naming import demo_names, new_run_prefix
from loopwatch.streams.demo.ports import free_ports
from loopwatch.streams.demo.worker_process import WorkerFailed, WorkerProcess
from loopwatch.streams.fleetview import DEFAULT_PORT as DEFAULT_DASHBOARD_PORT
from loopwatch.streams.kafka.admin import (
    BrokerUnreachable,
    TopicError,
    create_topics,
    delete_topics,
)
from loopwatch.streams.settings import Settings, SettingsError

SHARED_TRAJECTORIES = Path(__file__).resolve().parents[3] / "shared" / "data" / "trajectories"
"""Recorded real sessions beside the project on development machines and in CI."""


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "demo",
        help="the live demo: a worker and a simulated agent fleet (no model, no network)",
        description="Start a private broker on a free port (or use the one --bootstrap or "
        "KAFKA_BOOTSTRAP_SERVERS names), create topics of the demo's own "
        "(loopwatch-demo-<id>.*, removed at the end), start `loopwatch worker` under an "
        "app id of its own, then run simulated agents: some replay recorded sessions, some "
        "fall into each loop kind and change approach once the warning reaches their "
        "prompt. Prints each warning as it is placed, then a summary.",
    )
    parser.add_argument(
        "--bootstrap",
        type=bootstrap_servers,
        metavar="HOST:PORT",
        help="use this running broker instead of starting a private one "
        "(default: KAFKA_BOOTSTRAP_SERVERS when set)",
    )
    parser.add_argument(
        "--keep-worker",
        action="store_true",
        help="leave the worker, its topics (and a private broker) running",
    )
    parser.add_argument(
        "--trajectories",
        type=existing_dir,
        default=SHARED_TRAJECTORIES,
        help="also replay the *.jsonl event files here, when the folder exists "
        "(default: ../shared/data/trajectories)",
    )
    parser.add_argument(
        "--max-sessions-per-file",
        type=int_at_least(1),
        default=None,
        help="replay at most this many sessions of each trajectory file",
    )
    parser.add_argument(
        "--verdict-timeout",
        type=positive_float,
        default=5.0,
        help="seconds a verdict wait may take (default: %(default)s)",
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
    return 0 if raw.strip() == "0" else port(raw)


def run(args: argparse.Namespace) -> int:
    # aiokafka warns of each retried produce while a fresh broker elects partition
    # leaders; it retries by itself, and the demo's own output says what matters.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    if missing_worker_extra("demo"):
        return EXIT_USAGE
    try:
        return asyncio.run(_demo(args))
    except SettingsError as exc:
        print(f"loopwatch demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (BrokerError, BrokerUnreachable, TopicError, WorkerFailed) as exc:
        print(f"loopwatch demo: {exc}", file=sys.stderr)
        return EXIT_KAFKA


async def _demo(args: argparse.Namespace) -> int:
    from loopwatch.streams.demo.page import DemoPage  # noqa: PLC0415  (aiohttp: the worker extra)

    workdir = Path(tempfile.mkdtemp(prefix="loopwatch-demo-"))
    prefix = new_run_prefix()
    private = args.bootstrap is None and not os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    # every setting is checked before a broker is started (the broker's address is the
    # only one that comes later)
    settings = Settings.from_env(
        {
            "LOOPWATCH_DATA_DIR": str(workdir / "data"),
            "LOOPWATCH_WEB_PORT": str(free_ports()),
            **_configured(private_broker=private),
            **demo_names(prefix),
        }
    )
    broker = await asyncio.to_thread(ensure_broker, args.bootstrap, workdir / "kafka")
    settings = settings.model_copy(update={"bootstrap_servers": broker.bootstrap_servers})
    print(f"broker {broker.bootstrap_servers}; topics and consumer group {prefix}*")
    worker = WorkerProcess(settings, workdir / "worker.log")
    keep = topics_made = False
    page = DemoPage(settings, args.dashboard_port)
    try:
        for topic in await create_topics(settings):
            print(f"topic {topic.name}: {'created' if topic.created else 'exists'}")
        topics_made = True
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
            _print_left_running(worker, broker, prefix)
            worker.detach()
        else:
            code = await asyncio.to_thread(worker.stop)
            print(f"worker stopped (exit code {code})")
            await _clean_up(settings, broker, prefix, workdir, topics_made)
    passed = summary.loops_broken == summary.loops and not summary.clean_sessions_warned
    return EXIT_OK if passed else EXIT_LOOP_FOUND


async def _clean_up(
    settings: Settings, broker: Broker, prefix: str, workdir: Path, topics_made: bool
) -> None:
    if broker.private:
        await asyncio.to_thread(broker.release)
        print("private broker stopped")
    elif topics_made:
        try:
            deleted = await delete_topics(settings, prefix)
            print(f"removed the demo's {len(deleted)} topics ({prefix}*)")
        except (BrokerUnreachable, TopicError) as exc:
            print(f"could not remove the demo's topics {prefix}*: {exc}", file=sys.stderr)
    shutil.rmtree(workdir, ignore_errors=True)


def _print_left_running(worker: WorkerProcess, broker: Broker, prefix: str) -> None:
    print(f"worker left running: pid {worker.pid} (stop it with kill {worker.pid})")
    print(f"topics left in place: {prefix}*")
    if broker.private:
        print(f"private broker left running on {broker.bootstrap_servers}")
        print(f"  stop it with: {broker.stop_command()}")


_PRIVATE_BROKER_IGNORES = ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_", "KAFKA_SSL_")


def _configured(private_broker: bool) -> dict[str, str]:
    # The user's LOOPWATCH_* / KAFKA_* settings win over the demo's defaults (not over its
    # names and broker); a private broker speaks plaintext whatever the user's security is.
    return {
        k: v
        for k, v in os.environ.items()
        if k.startswith(("LOOPWATCH_", "KAFKA_"))
        and not (private_broker and k.startswith(_PRIVATE_BROKER_IGNORES))
    }


def _print_summary(summary: FleetSummary) -> None:
    print("\nloopwatch demo summary")
    for line in summary.lines():
        print(f"  {line}")
