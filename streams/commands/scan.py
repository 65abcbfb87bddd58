"""`loopwatch scan FILE|-`: detect loops in recorded sessions, offline."""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import IO, Any

from models import ConfigError, DetectionConfig, InvalidEvent, decode_event
from streams.commands.exit_codes import EXIT_USAGE
from streams.scanner import Scanner

_INTEGER = re.compile(r"^[+-]?\d+$")
_PROGRESS_EVERY = 20_000


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "scan",
        help="detect loops in a JSON-lines file of events (no broker needed)",
        description=(
            "Read events (docs/contract.md §2) as JSON lines, any number of interleaved "
            "sessions, and print one verdict JSON line per processed event, in input order. "
            "Duplicate "
            "and out-of-order events get no line; undecodable lines are reported on "
            "stderr and skipped."
        ),
    )
    parser.add_argument("file", help="the events file, or - for standard input")
    add_threshold_options(parser)
    parser.add_argument(
        "--warnings-only", action="store_true", help="print only verdicts with a warning"
    )
    parser.add_argument(
        "--fail-on-loop", action="store_true", help="exit 1 when any warning was found"
    )
    parser.add_argument(
        "--episodes",
        action="store_true",
        help="print loop episode records (docs/contract.md §8) instead of verdicts: one "
        "line per episode as it closes; episodes still open at the end of the input "
        "last, as expired",
    )
    parser.set_defaults(handler=run)


def add_threshold_options(parser: argparse.ArgumentParser) -> None:
    """`--threshold` and `--mutating-failure-threshold`, defaulting to DetectionConfig's."""
    defaults = DetectionConfig()
    parser.add_argument(
        "--threshold",
        default=str(defaults.threshold),
        help=f"rules 2-4 threshold (default {defaults.threshold})",
    )
    parser.add_argument(
        "--mutating-failure-threshold",
        default=str(defaults.mutating_failure_threshold),
        help=f"rule 1 threshold (default {defaults.mutating_failure_threshold})",
    )


def detection_config(args: argparse.Namespace) -> DetectionConfig:
    """The thresholds of `--threshold` / `--mutating-failure-threshold` (ConfigError if bad)."""
    values: dict[str, object] = {}
    for key in ("threshold", "mutating_failure_threshold"):
        raw: str = getattr(args, key)
        values[key] = int(raw) if _INTEGER.match(raw.strip()) else raw
    return DetectionConfig(**values)


def run(args: argparse.Namespace) -> int:
    try:
        config = detection_config(args)
    except ConfigError as exc:
        print(f"loopwatch scan: invalid config: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"loopwatch scan: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    with source:
        scanner = scan_lines(
            source, sys.stdout.buffer, config, args.warnings_only, episodes=args.episodes
        )
    print(f"loopwatch scan: {scanner.stats.summary()}", file=sys.stderr)
    found = sum(scanner.stats.warnings.values())
    return 1 if args.fail_on_loop and found else 0


def scan_lines(
    source: IO[bytes],
    out: IO[bytes],
    config: DetectionConfig,
    warnings_only: bool = False,
    *,
    episodes: bool = False,
) -> Scanner:
    """Scan JSON lines from `source`, writing verdict lines (or, with `episodes`, loop
    episode lines) to `out`."""
    scanner = Scanner(config)
    progress = sys.stderr.isatty()
    started = time.monotonic()
    write = out.write
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            event = decode_event(line)
        except InvalidEvent as exc:
            print(f"loopwatch scan: line {number}: skipped, {exc}", file=sys.stderr)
            continue
        verdict = scanner.process(event)
        if episodes:
            for episode in scanner.closed_episodes:
                write(episode.to_json() + b"\n")
        elif verdict is not None and (verdict.warning is not None or not warnings_only):
            write(verdict.to_json() + b"\n")
        if progress and number % _PROGRESS_EVERY == 0:
            rate = number / max(time.monotonic() - started, 1e-9)
            print(f"\r  {number:,} lines, {rate:,.0f}/s", end="", file=sys.stderr, flush=True)
    if episodes:
        for episode in scanner.open_episodes():
            write(episode.to_json() + b"\n")
    if progress:
        print("\r", end="", file=sys.stderr)
    out.flush()
    return scanner
