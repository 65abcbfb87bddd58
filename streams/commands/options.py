"""Option types shared by the sub-commands: each checks its value up front, so a bad one
ends in argparse's usage error (exit 2) naming the option and the value, never later in a
traceback."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path

from loopwatch.streams.settings import ENVIRONMENT, SettingsError


def positive_float(raw: str) -> float:
    """A finite number > 0 (seconds, say)."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {raw!r}")
    return value


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An integer >= `minimum` ("2.0" and "1e3" are not counts)."""

    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {minimum}, got {raw!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {raw!r}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def port(raw: str) -> int:
    """A TCP port, 1-65535."""
    value = int_at_least(1)(raw)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number (1-65535), got {raw!r}")
    return value


def existing_dir(raw: str) -> Path:
    """A directory that exists."""
    path = Path(raw)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{raw!r} is not a directory")
    return path


def output_dir(raw: str) -> Path:
    """A directory to write into: it exists, or its parent does (it is created then).

    Never creates a chain of directories: a typo must not grow a tree from the root."""
    path = Path(raw)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{raw!r} exists and is not a directory")
    if not path.exists() and not path.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"{raw!r}: its parent directory {str(path.parent)!r} does not exist"
        )
    return path


def output_file(raw: str) -> Path:
    """A file to write: not a directory, and its directory exists."""
    path = Path(raw)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{raw!r} is a directory, not a file")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"{raw!r}: its directory {str(path.parent)!r} does not exist"
        )
    return path


def bootstrap_servers(raw: str) -> str:
    """A comma-separated host:port list, checked as KAFKA_BOOTSTRAP_SERVERS is."""
    _variable, parse = ENVIRONMENT["bootstrap_servers"]
    try:
        servers: str = parse("the value", raw)
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return servers


def add_bootstrap_option(parser: argparse.ArgumentParser) -> None:
    """`--bootstrap`, for every command that talks to Kafka."""
    parser.add_argument(
        "--bootstrap",
        type=bootstrap_servers,
        metavar="HOST:PORT",
        help="the Kafka broker(s), comma-separated (default: KAFKA_BOOTSTRAP_SERVERS, else "
        "localhost:9092)",
    )


def command_environ(args: argparse.Namespace) -> dict[str, str]:
    """The process environment, with `--bootstrap` (when given) as KAFKA_BOOTSTRAP_SERVERS:
    the flag wins over the variable."""
    environ = dict(os.environ)
    bootstrap: str | None = getattr(args, "bootstrap", None)
    if bootstrap is not None:
        environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    return environ
