"""`loopwatch policy set|get|list|delete`: per-agent policy records on `loopwatch-config`
(docs/contract.md §9.6-§9.7)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

from loopwatch.models import DetectionConfig, InvalidPolicy
from loopwatch.models.policy import check_key
from loopwatch.streams.commands.exit_codes import EXIT_KAFKA, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE
from loopwatch.streams.commands.options import (
    add_bootstrap_option,
    command_environ,
    positive_float,
)
from loopwatch.streams.commands.policy_file import parse_policy_text, read_policy_text
from loopwatch.streams.kafka.admin import BrokerUnreachable, TopicError, create_topics
from loopwatch.streams.settings import Settings, SettingsError
from loopwatch.streams.worker.policy_book import PolicyBook
from loopwatch.streams.worker.policy_follower import delete_policy, read_policies, write_policy


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
    listing.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per key: key, version, profile and the record",
    )
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
        add_bootstrap_option(action)


def _fail(message: str, code: int) -> int:
    print(f"loopwatch policy: {message}", file=sys.stderr)
    return code


def _settings(args: argparse.Namespace) -> Settings | str:
    try:
        return Settings.from_env(command_environ(args))
    except SettingsError as exc:
        return f"invalid settings: {exc}"


async def _current(settings: Settings, timeout: float) -> PolicyBook:
    return (await _read(settings, timeout))[0]


async def _read(settings: Settings, timeout: float) -> tuple[PolicyBook, int]:
    """The policies in force, and the lowest version a new record may have: above every
    version the topic holds and above its end offset, so that a version is never given
    twice, even after a delete and compaction (contract §9.7)."""
    await create_topics(settings, timeout=timeout)  # a first `set` finds no topic yet
    book = PolicyBook(DetectionConfig())
    end = await read_policies(settings, book, timeout=timeout)
    return book, max(book.highest_version, end) + 1


def _run(action: Coroutine[Any, Any, int]) -> int:
    # aiokafka logs every failed connection attempt; our one message says it better
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        return asyncio.run(action)
    except (BrokerUnreachable, TopicError, TimeoutError) as exc:
        return _fail(str(exc), EXIT_KAFKA)


def run_set(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if isinstance(settings, str):
        return _fail(settings, EXIT_USAGE)
    try:
        text = read_policy_text(args.file)
        record = parse_policy_text(args.agent, text)  # its own faults, before Kafka
    except InvalidPolicy as exc:
        return _fail(f"invalid policy: {exc}", EXIT_USAGE)
    own_version = json.loads(text).get("version")

    async def put() -> int:
        _book, lowest = await _read(settings, args.timeout)
        # a record's own version is kept when it is new; an older one would name a
        # version that verdicts already carry
        policy = replace(record, version=max(record.version, lowest))
        await write_policy(settings, policy)
        note = (
            f"; the record's version {own_version} was already used"
            if own_version is not None and own_version != policy.version
            else ""
        )
        print(f"set {policy.key} version {policy.version} (profile {policy.config.profile}{note})")
        return EXIT_OK

    return _run(put())


def run_get(args: argparse.Namespace) -> int:
    settings = _settings(args)
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
    settings = _settings(args)
    if isinstance(settings, str):
        return _fail(settings, EXIT_USAGE)

    async def listing() -> int:
        for policy in (await _current(settings, args.timeout)).policies():
            if args.json:
                record = policy.to_record()
                listed = {"key": policy.key, "version": policy.version, "record": record}
                print(json.dumps({**listed, "profile": policy.config.profile}, sort_keys=True))
            else:
                print(f"{policy.key}\t{policy.version}\t{policy.config.profile}")
        return EXIT_OK

    return _run(listing())


def run_delete(args: argparse.Namespace) -> int:
    settings = _settings(args)
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
