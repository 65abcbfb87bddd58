"""`loopwatch acls`: the least Kafka rights of each role, as `kafka-acls.sh` commands, or
applied through the admin client with `--apply` (docs/operations.md, "Least privilege")."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from loopwatch.streams.commands.exit_codes import EXIT_KAFKA, EXIT_OK, EXIT_USAGE
from loopwatch.streams.commands.options import positive_float
from loopwatch.streams.kafka.acl_admin import AclError, create_acls
from loopwatch.streams.kafka.acls import ROLES, Grant, Names, Role, grants, kafka_acls_command
from loopwatch.streams.kafka.admin import BrokerUnreachable, connect_admin
from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.settings import Settings, SettingsError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "acls",
        help="print (or apply) the least Kafka ACLs of each role",
        description="Print the kafka-acls.sh commands that give each role (worker, runtime, "
        "dashboard, bridge, admin) exactly the rights it needs on the configured topics, "
        "consumer groups and app id (LOOPWATCH_*_TOPIC, LOOPWATCH_APP_ID, "
        "LOOPWATCH_OTEL_APP_ID, LOOPWATCH_OTEL_TOPIC), or create them with --apply as the "
        "configured principal (it needs ALTER on the cluster).",
    )
    parser.add_argument(
        "--role",
        dest="roles",
        action="append",
        choices=ROLES,
        help="only this role (repeatable; default: every role)",
    )
    parser.add_argument(
        "--principal",
        action="append",
        default=[],
        metavar="ROLE=PRINCIPAL",
        type=_principal,
        help="the principal of a role (repeatable; default User:ROLE), e.g. "
        "runtime=User:tenant-a-runtime",
    )
    parser.add_argument(
        "--runtime-group",
        help="the runtimes' consumer group (default: the client's, "
        "loopwatch-runtimes.<verdicts topic>)",
    )
    parser.add_argument(
        "--command-config",
        default="admin.properties",
        help="the admin client properties file named in the printed commands "
        "(default: %(default)s)",
    )
    parser.add_argument("--apply", action="store_true", help="create the ACLs on the broker")
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=30.0,
        help="seconds to wait for the broker with --apply (default: %(default)s)",
    )
    parser.set_defaults(handler=run)


def _principal(raw: str) -> tuple[Role, str]:
    role, sep, principal = raw.partition("=")
    if not sep or role not in ROLES or not principal.strip():
        raise argparse.ArgumentTypeError(
            f"expected ROLE=PRINCIPAL with ROLE one of {', '.join(ROLES)}, got {raw!r}"
        )
    principal = principal.strip()
    if ":" not in principal:
        principal = f"User:{principal}"
    return role, principal


def run(args: argparse.Namespace) -> int:
    try:
        bridge = OtelSettings.from_env()
    except SettingsError as exc:
        print(f"loopwatch acls: invalid settings: {exc}", file=sys.stderr)
        return EXIT_USAGE
    names = Names.of(bridge.base, bridge, args.runtime_group)
    roles: list[Role] = args.roles or list(ROLES)
    chosen = grants(names, dict(args.principal), roles)
    if not args.apply:
        _print_commands(chosen, bridge.base, args.command_config)
        return EXIT_OK
    # aiokafka logs every failed connection attempt; our one message says it better
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        asyncio.run(_apply(bridge.base, chosen, args.timeout))
    except (BrokerUnreachable, AclError) as exc:
        print(f"loopwatch acls: {exc}", file=sys.stderr)
        return EXIT_KAFKA
    return EXIT_OK


def _print_commands(chosen: list[Grant], settings: Settings, command_config: str) -> None:
    shown: str | None = None
    for grant in chosen:
        heading = f"# {grant.role} ({grant.principal})"
        if heading != shown:
            print(heading if shown is None else f"\n{heading}")
            shown = heading
        print(kafka_acls_command(grant, settings.bootstrap_servers, command_config))


async def _apply(settings: Settings, chosen: list[Grant], timeout: float) -> None:
    admin = await connect_admin(settings, timeout)

    def created(grant: Grant) -> None:
        where = grant.resource if grant.resource == "cluster" else f"{grant.resource} {grant.name}"
        pattern = " (prefixed)" if grant.pattern == "prefixed" else ""
        operations = ", ".join(grant.operations)
        print(f"{grant.role}: {grant.principal} may {operations} on {where}{pattern}")

    try:
        await create_acls(admin, chosen, created)
    finally:
        await admin.close()
