"""`loopwatch` command line: one sub-command per module under `streams.commands`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from streams.commands import COMMANDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopwatch",
        description="Fleet-wide tool-loop detection for AI agents.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
