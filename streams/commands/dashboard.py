"""`loopwatch dashboard`: the live fleet page, fed from `loop-warnings` and `loop-episodes`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from loopwatch.streams.commands.exit_codes import EXIT_KAFKA, EXIT_OK, EXIT_USAGE
from loopwatch.streams.commands.options import add_bootstrap_option, command_environ, port
from loopwatch.streams.commands.service import missing_worker_extra
from loopwatch.streams.fleetview import DEFAULT_PORT
from loopwatch.streams.fleetview.feed import FeedError, FeedTopics
from loopwatch.streams.kafka.admin import BrokerUnreachable
from loopwatch.streams.settings import ENVIRONMENT, Settings, SettingsError

DEFAULT_SINCE_MINUTES = 60.0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "dashboard",
        help="serve the live fleet page (loops open now, per rule, agent and tool)",
        description="Serve a web page fed live from the warnings and episodes topics: loops "
        "open now, loops per minute by rule, top looping agents and tools, loops broken "
        "after the first warning, time to break, recent loops. The broker and topic "
        "names come from the same environment as the worker (KAFKA_*, LOOPWATCH_*).",
    )
    add_options(parser)
    parser.set_defaults(handler=run)


def add_options(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_option(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    parser.add_argument(
        "--warnings-topic",
        type=topic_name,
        default=None,
        help="default: LOOPWATCH_WARNINGS_TOPIC or loop-warnings",
    )
    parser.add_argument(
        "--episodes-topic",
        type=topic_name,
        default=None,
        help="default: LOOPWATCH_EPISODES_TOPIC or loop-episodes",
    )
    parser.add_argument(
        "--since",
        type=minutes,
        default=DEFAULT_SINCE_MINUTES,
        metavar="MINUTES",
        help="start from the records of the last MINUTES (0: only new ones; default 60)",
    )


def topic_name(raw: str) -> str:
    """A topic name, checked as LOOPWATCH_*_TOPIC are."""
    _variable, parse = ENVIRONMENT["warnings_topic"]
    try:
        name: str = parse("the value", raw.strip())
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name


def minutes(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 60 * 24 * 366:
        raise argparse.ArgumentTypeError(f"must be minutes from 0 to 527040, got {raw!r}")
    return value


def feed_topics(args: argparse.Namespace, settings: Settings) -> FeedTopics:
    return FeedTopics(
        warnings=args.warnings_topic or settings.warnings_topic,
        episodes=args.episodes_topic or settings.episodes_topic,
    )


def run(args: argparse.Namespace) -> int:
    if missing_worker_extra("dashboard"):
        return EXIT_USAGE
    from loopwatch.streams.fleetview.server import DashboardError  # noqa: PLC0415  (aiohttp)

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env(command_environ(args))
    except SettingsError as exc:
        return _fail(str(exc), EXIT_USAGE)
    try:
        return asyncio.run(_serve(args, settings))
    except BrokerUnreachable as exc:
        return _fail(str(exc), EXIT_KAFKA)
    except (FeedError, DashboardError) as exc:
        return _fail(str(exc), EXIT_USAGE)


def _fail(message: str, code: int) -> int:
    print(f"loopwatch dashboard: {message}", file=sys.stderr)
    return code


async def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from loopwatch.streams.fleetview.server import start_dashboard, until_interrupted  # noqa: PLC0415

    # aiokafka logs each failed connection attempt (~60 lines before the connect gives
    # up): silent while connecting, where our one message says it; then outages are
    # summarised as the worker's are (streams.worker.broker_outage)
    aiokafka_log = logging.getLogger("aiokafka")
    aiokafka_log.setLevel(logging.CRITICAL)
    dashboard = await start_dashboard(
        settings,
        feed_topics(args, settings),
        host=args.host,
        port=args.port,
        since_seconds=args.since * 60,
    )
    aiokafka_log.setLevel(logging.WARNING)
    outage_log = asyncio.create_task(_summarise_outages(), name="loopwatch-dashboard-outages")
    print(f"loopwatch dashboard: {dashboard.url} (Ctrl-C stops it)", flush=True)
    if settings.dashboard_token is not None:
        print(f"  it needs its token: open {dashboard.url}?token=<LOOPWATCH_DASHBOARD_TOKEN> once")
    try:
        await until_interrupted()
    finally:
        outage_log.cancel()
        await dashboard.stop()
    return EXIT_OK


async def _summarise_outages() -> None:
    from loopwatch.streams.worker.broker_outage import BrokerOutage, install  # noqa: PLC0415

    outage = BrokerOutage(logging.getLogger("loopwatch.dashboard"), subject="the dashboard")
    install(outage)
    while True:
        await asyncio.sleep(1.0)
        outage.tick()
