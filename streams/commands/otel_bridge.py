"""`loopwatch otel-bridge`: ensure the topics, then turn OpenTelemetry GenAI spans from the
Collector's Kafka exporter into loopwatch events until stopped (docs/otel.md)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any

from loopwatch.streams.commands.exit_codes import EXIT_USAGE
from loopwatch.streams.commands.options import command_environ
from loopwatch.streams.commands.service import (
    add_service_options,
    missing_worker_extra,
    run_service,
)
from loopwatch.streams.settings import SettingsError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "otel-bridge",
        help="publish agent events from OpenTelemetry GenAI spans (Collector Kafka exporter)",
        description="Read the OpenTelemetry Collector Kafka exporter's topic (otlp_proto or "
        "otlp_json), map GenAI chat/execute_tool spans to loopwatch events, order them per "
        "session and publish them to agent-events until SIGTERM/SIGINT. Configured by the "
        "environment (LOOPWATCH_OTEL_*, see docs/otel.md).",
    )
    add_service_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if missing_worker_extra("otel-bridge"):
        return EXIT_USAGE
    if importlib.util.find_spec("opentelemetry.proto") is None:
        print(
            "loopwatch otel-bridge: needs the `worker` extra: pip install 'loopwatch[worker]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from loopwatch.streams.otel.settings import OtelSettings  # noqa: PLC0415
    from loopwatch.streams.otel.topics import create_bridge_topics  # noqa: PLC0415

    try:
        settings = OtelSettings.from_env(command_environ(args))
    except SettingsError as exc:
        print(f"loopwatch otel-bridge: {exc}", file=sys.stderr)
        return EXIT_USAGE

    def build_app() -> Any:
        from loopwatch.streams.otel.app import create_bridge_app  # noqa: PLC0415

        return create_bridge_app(settings)

    return run_service(
        "otel-bridge",
        args,
        lambda timeout: create_bridge_topics(settings, timeout),
        build_app,
    )
