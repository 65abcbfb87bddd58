"""`loopwatch` command line: one sub-command per module under `streams.commands`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from loopwatch.streams.commands import COMMANDS
from loopwatch.streams.commands.exit_codes import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    exit_code_table,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopwatch",
        description="Fleet-wide tool-loop detection for AI agents.",
        epilog=exit_code_table()
        + "\n\nThe wire and behaviour contract (events, fingerprints, rules, verdicts, "
        "placement, dead letters) is docs/contract.md in the loopwatch project.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"loopwatch {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in COMMANDS:
        register(sub)
    return parser


def _version() -> str:
    try:
        return version("loopwatch")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except BrokenPipeError:
        # The reader went away (`loopwatch scan ... | head`): stop quietly, like cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
