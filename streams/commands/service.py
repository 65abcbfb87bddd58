"""Running a faust app as a service: the options, the topics check, the worker until
SIGTERM/SIGINT. Shared by `loopwatch worker` and `loopwatch otel-bridge`."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from loopwatch.streams.commands.exit_codes import EXIT_KAFKA
from loopwatch.streams.commands.options import add_bootstrap_option, positive_float
from loopwatch.streams.kafka.admin import BrokerUnreachable, TopicError, TopicOutcome
from loopwatch.streams.scan.scanner import counted

if TYPE_CHECKING:  # the worker's modules need the `worker` extra: imported when run
    from loopwatch.streams.worker.broker_outage import BrokerOutage

# what the `worker` extra installs (pyproject.toml); the base install has none of them
WORKER_EXTRA_MODULES = ("faust", "mode", "prometheus_client", "aiohttp")


def _installed(module: str) -> bool:
    if module in sys.modules:  # faust replaces its module object with one without __spec__
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module whose __spec__ is None: it is there
        return True


def missing_worker_extra(command: str) -> bool:
    """True, with a message naming the extra, when `command` cannot run in this install."""
    missing = [m for m in WORKER_EXTRA_MODULES if not _installed(m)]
    if missing:
        print(
            f"loopwatch {command}: needs the `worker` extra: pip install 'loopwatch[worker]' "
            f"(missing: {', '.join(missing)})",
            file=sys.stderr,
        )
    return bool(missing)


def add_service_options(parser: argparse.ArgumentParser) -> None:
    """The options of a command that runs a stream app as a service."""
    add_bootstrap_option(parser)
    parser.add_argument(
        "--loglevel",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="faust/worker log level (default: info)",
    )
    parser.add_argument(
        "--topic-timeout",
        type=positive_float,
        default=30.0,
        help="seconds to wait for the broker while ensuring topics (default: 30)",
    )


def run_service(
    command: str,
    args: argparse.Namespace,
    ensure_topics: Callable[[float], Awaitable[list[TopicOutcome]]],
    build_app: Callable[[], Any],
    log_format: str = "text",
) -> int:
    """Ensure the topics (printing each), then run the app until SIGTERM/SIGINT."""
    # One loop for the topic check and the app: faust binds to the current loop.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        for outcome in loop.run_until_complete(ensure_topics(args.topic_timeout)):
            state = "created" if outcome.created else "exists"
            print(f"topic {outcome.name}: {state}, {counted(outcome.partitions, 'partition')}")
    except (BrokerUnreachable, TopicError) as exc:
        print(f"loopwatch {command}: {exc}", file=sys.stderr)
        loop.close()
        return EXIT_KAFKA
    app = build_app()
    # the worker's app watches broker outages (streams.worker.broker_outage); others may not
    outage = getattr(app, "loopwatch_outage", None)
    return run_faust_app(app, args.loglevel, loop, log_format=log_format, outage=outage)


def run_faust_app(
    app: Any,
    loglevel: str,
    loop: asyncio.AbstractEventLoop,
    *,
    log_format: str = "text",
    outage: BrokerOutage | None = None,
) -> int:
    """Run a faust app as a service until SIGTERM/SIGINT; its exit code. `outage`: summarise
    broker outages in the log (streams.worker.broker_outage) instead of aiokafka's line per
    retry."""
    # lazy: `loopwatch --help` and scan need no faust (the base install has none)
    from loopwatch.streams.kafka.faust_ext.app import ServiceWorker as FaustServiceWorker  # noqa: PLC0415
    from loopwatch.streams.worker.broker_outage import install as install_outage_filter  # noqa: PLC0415
    from loopwatch.streams.worker.log_format import use_json  # noqa: PLC0415

    class ServiceWorker(FaustServiceWorker):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if not self.stdout.isatty():  # no spinner escape codes in a log file
                self.spinner = None

        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            super().on_setup_root_logger(logger, level)
            if log_format == "json":
                use_json(logger)
            if outage is not None:
                install_outage_filter(outage)

    worker = ServiceWorker(app, loglevel=loglevel, loop=loop)
    try:
        worker.execute_from_commandline()
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0
