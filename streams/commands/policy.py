"""`loopwatch policy set|get|list|delete`: per-agent policy records on `loopwatch-config`
(docs/contract.md §9.6-§9.7)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Coroutine
from typing import Any

from loopwatch.models import DetectionConfig, InvalidPolicy, parse_policy
from loopwatch.models.policy import check_key
from loopwatch.streams.commands.options import positive_float
from loopwatch.streams.kafka.admin import BrokerUnreachable, TopicError, create_topics
from loopwatch.streams.settings import Settings, SettingsError
from loopwatch.streams.worker.policy_book import PolicyBook
from loopwatch.streams.worker.policy_follower import delete_policy, read_policies, write_policy

EXIT_OK = 0
EXIT_KAFKA = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "policy",
        help="write and read per-agent detection policies",
        description="Per-agent policies on the compacted topic LOOPWATCH_CONFIG_TOPIC "
        "(default loopwatch-config), keyed by agent id, or * for the fleet default. "
        "Running workers apply a new policy to the next event, without a restart.",
    )
    actions = parser.add_subparsers(dest="policy_action", metavar="ACTION", required=True)
    put = actions.add_parser("set", help="validate a policy record and write it")
    put.add_argument("agent", help="the agent id, or * for the fleet default")
    put.add_argument("file", help="the record as a JSON file, or - for standard input")
    put.set_defaults(handler=run_set)
    get = actions.add_parser("get", help="print the policy in force for one key")
    get.add_argument("agent", help="the agent id, or * for the fleet default")
    get.set_defaults(handler=run_get)
    listing = actions.add_parser("list", help="list every key with its version and profile")
    listing.set_defaults(handler=run_list)
    delete = actions.add_parser(
        "delete",
        help="remove the policy of one key (a tombstone): its agents fall back to the * "
        "default, or to the workers' settings",
    )
    delete.add_argument("agent", help="the agent id, or * for the fleet default")
    delete.set_defaults(handler=run_delete)
    for action in (put, get, listing, delete):
        action.add_argument(
            "--timeout",
            type=positive_float,
            default=30.0,
            help="seconds to wait for the broker (default 30)",
        )


def _fail(message: str, code: int) -> int:
    print(f"loopwatch policy: {message}", file=sys.stderr)
    return code


def _settings() -> Settings | str:
    try:
        return Settings.from_env()
    except SettingsError as exc:
        return f"invalid settings: {exc}"


async def _current(settings: Settings, timeout: float) -> PolicyBook:
    await create_topics(settings, timeout=timeout)  # a first `set` finds no topic yet
    book = PolicyBook(DetectionConfig())
    await read_policies(settings, book, timeout=timeout)
    return book


def _run(action: Coroutine[Any, Any, int]) -> int:
    # aiokafka logs every failed connection attempt; our one message says it better
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        return asyncio.run(action)
    except (BrokerUnreachable, TopicError, TimeoutError) as exc:
        return _fail(str(exc), EXIT_KAFKA)


def run_set(args: argparse.Namespace) -> int:
    settings = _settings()
    if isinstance(settings, str):
        return _fail(settings, EXIT_USAGE)
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as source:
                text = source.read()
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"cannot read {args.file}: {exc}", EXIT_USAGE)
    try:
        parse_policy(args.agent, text, version=1)  # the record's own faults, before Kafka
    except InvalidPolicy as exc:
        return _fail(f"invalid policy: {exc}", EXIT_USAGE)

    async def put() -> int:
        book = await _current(settings, args.timeout)
        current = book.get(args.agent)
        policy = parse_policy(
            args.agent, text, version=1 if current is None else current.version + 1
        )
        await write_policy(settings, policy)
        print(f"set {policy.key} version {policy.version} (profile {policy.config.profile})")
        return EXIT_OK

    return _run(put())


def run_get(args: argparse.Namespace) -> int:
    settings = _settings()
    if isinstance(settings, str):
        return _fail(settings, EXIT_USAGE)

    async def get() -> int:
        policy = (await _current(settings, args.timeout)).get(args.agent)
        if policy is None:
            return _fail(f"no policy for {args.agent!r}", EXIT_NOT_FOUND)
        print(json.dumps(policy.to_record(), sort_keys=True))
        return EXIT_OK

    return _run(get())


def run_list(args: argparse.Namespace) -> int:
    settings = _settings()
    if isinstance(settings, str):
        return _fail(settings, EXIT_USAGE)

    async def listing() -> int:
        for policy in (await _current(settings, args.timeout)).policies():
            print(f"{policy.key}\t{policy.version}\t{policy.config.profile}")
        return EXIT_OK

    return _run(listing())


def run_delete(args: argparse.Namespace) -> int:
    settings = _settings()
    if isinstance(settings, str):
        return _fail(settings, EXIT_USAGE)
    try:
        key = check_key(args.agent)
    except InvalidPolicy as exc:
        return _fail(f"invalid key: {exc}", EXIT_USAGE)

    async def delete() -> int:
        current = (await _current(settings, args.timeout)).get(key)
        if current is None:
            return _fail(f"no policy for {key!r}", EXIT_NOT_FOUND)
        await delete_policy(settings, key)
        print(f"deleted {key} (was version {current.version})")
        return EXIT_OK

    return _run(delete())
