"""`loopwatch worker`: ensure the topics exist, then run the stream app until stopped."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from loopwatch.streams.commands.exit_codes import EXIT_USAGE
from loopwatch.streams.commands.options import command_environ
from loopwatch.streams.commands.service import (
    add_service_options,
    missing_worker_extra,
    run_service,
)
from loopwatch.streams.kafka.startup import prepare_worker
from loopwatch.streams.settings import Settings, SettingsError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "worker",
        help="run the stream app (a faust worker) on the configured Kafka",
        description="Create the loopwatch topics when missing (same partitions for events "
        "and the sessions changelog), then consume agent events and publish one verdict "
        "per event until SIGTERM/SIGINT. Configured by the environment (see README).",
    )
    add_service_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if missing_worker_extra("worker"):
        return EXIT_USAGE
    try:
        settings = Settings.from_env(command_environ(args))
    except SettingsError as exc:
        print(f"loopwatch worker: {exc}", file=sys.stderr)
        return EXIT_USAGE

    def build_app() -> Any:
        from loopwatch.streams.worker.app import create_app  # noqa: PLC0415  (lazy: `--help` needs no faust)

        return create_app(settings, follow_policies=True)

    return run_service(
        "worker",
        args,
        lambda timeout: prepare_worker(settings, timeout),
        build_app,
        log_format=settings.log_format,
    )
