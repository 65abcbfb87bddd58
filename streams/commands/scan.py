"""`loopwatch scan FILE...`: detect loops in recorded sessions, offline.

Exit codes: 0 done; 1 `--fail-on-loop` and a warning was found; 2 bad options, settings
or an unreadable file; 3 `--strict` and some line was invalid (it wins over 1: a gate
over garbage must not pass, nor report a loop it could not check fully).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Mapping
from contextlib import ExitStack
from typing import IO, Any

from models import ConfigError, DetectionConfig, InvalidEvent, decode_event
from streams.scanner import Scanner
from streams.settings import ENVIRONMENT, SettingsError

EXIT_DONE = 0
EXIT_LOOP_FOUND = 1
EXIT_USAGE = 2
EXIT_INVALID_INPUT = 3

_INTEGER = re.compile(r"^[+-]?\d+$")
_PROGRESS_EVERY = 20_000
_THRESHOLDS = ("threshold", "mutating_failure_threshold")


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "scan",
        help="detect loops in JSON-lines files of events (no broker needed)",
        description=(
            "Read events (docs/contract.md §2) as JSON lines, any number of interleaved "
            "sessions, and print one verdict JSON line per processed event, in input order "
            "(files one after the other, sessions carried across them). Duplicate and "
            "out-of-order events get no line; invalid lines are reported on stderr with their line "
            "number, skipped and counted. Thresholds default to LOOPWATCH_THRESHOLD and "
            "LOOPWATCH_MUTATING_FAILURE_THRESHOLD, as for the worker; a flag overrides them. "
            "Exit codes: 0 done, 1 --fail-on-loop and a warning found, 2 bad options or "
            "unreadable file, 3 --strict and some line was invalid."
        ),
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="events files, or - for standard input"
    )
    parser.add_argument("--threshold", help="rules 2-4 threshold (default 3)")
    parser.add_argument("--mutating-failure-threshold", help="rule 1 threshold (default 2)")
    parser.add_argument(
        "--warnings-only", action="store_true", help="print only verdicts with a warning"
    )
    parser.add_argument(
        "--fail-on-loop", action="store_true", help="exit 1 when any warning was found"
    )
    parser.add_argument("--strict", action="store_true", help="exit 3 when any line was invalid")
    parser.add_argument(
        "--episodes",
        action="store_true",
        help="print loop episode records (docs/contract.md §8) instead of verdicts: one "
        "line per episode as it closes; episodes still open at the end of the input "
        "last, as expired",
    )
    parser.set_defaults(handler=run)


def detection_config(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> DetectionConfig:
    """Thresholds from `--threshold` / `--mutating-failure-threshold`, else from the
    worker's environment variables in `environ` (validated by the worker's own parsers),
    else the defaults. Raises ConfigError (a bad flag) or SettingsError (a bad variable)."""
    environ = {} if environ is None else environ
    values: dict[str, object] = {}
    for key in _THRESHOLDS:
        flag: str | None = getattr(args, key)
        if flag is not None:
            values[key] = int(flag) if _INTEGER.match(flag.strip()) else flag
            continue
        name, parse = ENVIRONMENT[key]
        raw = environ.get(name, "").strip()
        if raw:
            values[key] = parse(name, raw)
    return DetectionConfig(**values)


def run(args: argparse.Namespace) -> int:
    try:
        config = detection_config(args, os.environ)
    except ConfigError as exc:
        print(f"loopwatch scan: invalid config: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SettingsError as exc:
        print(f"loopwatch scan: invalid setting: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.files.count("-") > 1:
        print("loopwatch scan: standard input (-) can be read only once", file=sys.stderr)
        return EXIT_USAGE
    scanner = Scanner(config)
    with ExitStack() as stack:
        sources: list[tuple[str, IO[bytes]]] = []
        for name in args.files:  # open all first: a typo fails before any output
            try:
                source = sys.stdin.buffer if name == "-" else open(name, "rb")  # noqa: SIM115
            except OSError as exc:
                print(f"loopwatch scan: cannot read {name}: {exc.strerror}", file=sys.stderr)
                return EXIT_USAGE
            sources.append((name, stack.enter_context(source)))
        for name, source in sources:
            try:
                scan_lines(
                    source,
                    sys.stdout.buffer,
                    scanner,
                    args.warnings_only,
                    name=name,
                    episodes=args.episodes,
                )
            except OSError as exc:  # e.g. a directory, or an I/O error mid-file
                print(f"loopwatch scan: cannot read {name}: {exc.strerror}", file=sys.stderr)
                return EXIT_USAGE
    print(f"loopwatch scan: {scanner.stats.summary()}", file=sys.stderr)
    if args.strict and scanner.stats.invalid:
        return EXIT_INVALID_INPUT
    found = sum(scanner.stats.warnings.values())
    return EXIT_LOOP_FOUND if args.fail_on_loop and found else EXIT_DONE


def scan_lines(
    source: IO[bytes],
    out: IO[bytes],
    scanner: Scanner,
    warnings_only: bool = False,
    *,
    name: str = "-",
    episodes: bool = False,
) -> Scanner:
    """Scan JSON lines from `source` with `scanner`, writing verdict lines to `out`.
    An invalid line is reported on stderr, counted in `scanner.stats.invalid` and skipped."""
    progress = sys.stderr.isatty()
    started = time.monotonic()
    write = out.write
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            verdict = scanner.process(decode_event(line))
            if episodes:
                encoded = b"".join(e.to_json() + b"\n" for e in scanner.closed_episodes) or None
            else:
                shown = verdict is not None and (verdict.warning is not None or not warnings_only)
                encoded = verdict.to_json() + b"\n" if verdict is not None and shown else None
        except InvalidEvent as exc:
            _skip(scanner, name, number, str(exc))
            continue
        except Exception as exc:  # a detector bug: report the line, go on
            _skip(scanner, name, number, f"internal: {type(exc).__name__}")
            continue
        if encoded is not None:
            write(encoded)
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


def _skip(scanner: Scanner, name: str, number: int, reason: str) -> None:
    scanner.stats.invalid += 1
    print(f"loopwatch scan: {name}: line {number}: skipped, {reason}", file=sys.stderr)
