"""Sub-commands of `loopwatch`. Each module exposes `register(subparsers)`, which adds its
parser and sets `handler` (a function `args -> exit code`) as a default."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

Register = Callable[["argparse._SubParsersAction[Any]"], None]

COMMANDS: list[Register] = []

from loopwatch.streams.commands import scan, schema, worker  # noqa: E402  (registry first, then the commands)

COMMANDS.append(scan.register)
COMMANDS.append(schema.register)

from loopwatch.streams.commands import topics  # noqa: E402

COMMANDS.append(topics.register)
COMMANDS.append(worker.register)

from loopwatch.streams.commands import demo  # noqa: E402

COMMANDS.append(demo.register)

from loopwatch.streams.commands import dashboard  # noqa: E402

COMMANDS.append(dashboard.register)

from loopwatch.streams.commands import report  # noqa: E402

COMMANDS.append(report.register)

from loopwatch.streams.commands import policy  # noqa: E402

COMMANDS.append(policy.register)

from loopwatch.streams.commands import otel_bridge  # noqa: E402

COMMANDS.append(otel_bridge.register)

from loopwatch.streams.commands import replay  # noqa: E402

COMMANDS.append(replay.register)

from loopwatch.streams.commands import acls  # noqa: E402

COMMANDS.append(acls.register)
