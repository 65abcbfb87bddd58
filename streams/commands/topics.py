"""`loopwatch topics create`: create the Kafka topics the worker needs (idempotent)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any

from loopwatch.streams.commands.exit_codes import EXIT_KAFKA, EXIT_OK, EXIT_USAGE
from loopwatch.streams.commands.options import (
    add_bootstrap_option,
    command_environ,
    positive_float,
)
from loopwatch.streams.kafka.admin import BrokerUnreachable, TopicError, create_topics, topic_specs
from loopwatch.streams.scan.scanner import counted
from loopwatch.streams.settings import Settings, SettingsError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "topics",
        help="manage loopwatch's Kafka topics",
        description="Manage the Kafka topics loopwatch reads and writes. Names, partitions "
        "and retention come from the environment (see the README's configuration table).",
    )
    actions = parser.add_subparsers(dest="topics_action", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create",
        help="create the missing topics; check the partitions of existing ones",
        description="Create the events, verdicts, warnings and dead-letter topics and the "
        "sessions table's changelog. Existing topics are left as they are.",
    )
    create.add_argument(
        "--timeout",
        type=positive_float,
        default=60.0,
        help="seconds to wait for the broker (default: %(default)s)",
    )
    add_bootstrap_option(create)
    create.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per topic (name, created, partitions, configs)",
    )
    create.set_defaults(handler=run_create)


def run_create(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env(command_environ(args))
    except SettingsError as exc:
        print(f"loopwatch topics: invalid settings: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # aiokafka logs every failed connection attempt; our one message says it better
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        outcomes = asyncio.run(create_topics(settings, timeout=args.timeout))
    except (BrokerUnreachable, TopicError) as exc:
        print(f"loopwatch topics: {exc}", file=sys.stderr)
        return EXIT_KAFKA
    configs = {spec.name: spec.configs for spec in topic_specs(settings)}
    for outcome in outcomes:
        config = configs[outcome.name]
        if args.json:
            record = {
                "name": outcome.name,
                "created": outcome.created,
                "partitions": outcome.partitions,
                "configs": dict(config),
            }
            print(json.dumps(record, sort_keys=True))
            continue
        verb = "created" if outcome.created else "exists "
        extra = ", ".join(f"{k}={v}" for k, v in config.items())
        print(f"{verb} {outcome.name} ({counted(outcome.partitions, 'partition')}; {extra})")
    return EXIT_OK
