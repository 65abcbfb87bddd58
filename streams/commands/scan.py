"""`loopwatch scan FILE|-`: detect loops in recorded sessions, offline."""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import IO, Any

from models import (
    DEFAULT_KEY,
    ConfigError,
    DetectionConfig,
    InvalidEvent,
    InvalidPolicy,
    Policy,
    PolicyRef,
    decode_event,
    parse_policy,
)
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
    parser.add_argument("--threshold", default="3", help="rules 2-4 threshold (default 3)")
    parser.add_argument(
        "--mutating-failure-threshold", default="2", help="rule 1 threshold (default 2)"
    )
    parser.add_argument(
        "--profile",
        default="seed",
        help="seed (default: SPEC §4's four rules) or extended (docs/contract.md §9)",
    )
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="judge every event with this policy record (JSON, docs/contract.md §9.6) as "
        "the key *; instead of --profile and the thresholds",
    )
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


def detection_config(args: argparse.Namespace) -> DetectionConfig:
    """The profile and thresholds of `--profile`, `--threshold` and
    `--mutating-failure-threshold` (ConfigError if bad)."""
    values: dict[str, object] = {"profile": getattr(args, "profile", "seed")}
    for key in ("threshold", "mutating_failure_threshold"):
        raw: str = getattr(args, key)
        values[key] = int(raw) if _INTEGER.match(raw.strip()) else raw
    return DetectionConfig(**values)


def _policy(path: str) -> Policy:
    try:
        with open(path, "rb") as source:
            return parse_policy(DEFAULT_KEY, source.read())
    except OSError as exc:
        raise InvalidPolicy(f"cannot read {path}: {exc.strerror}") from None


def run(args: argparse.Namespace) -> int:
    ref: PolicyRef | None = None
    try:
        if args.policy is None:
            config = detection_config(args)
        else:
            policy = _policy(args.policy)
            config, ref = policy.config, policy.ref
    except ConfigError as exc:
        print(f"loopwatch scan: invalid config: {exc}", file=sys.stderr)
        return 2
    except InvalidPolicy as exc:
        print(f"loopwatch scan: invalid policy {args.policy}: {exc}", file=sys.stderr)
        return 2
    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"loopwatch scan: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    with source:
        scanner = scan_lines(
            source,
            sys.stdout.buffer,
            config,
            args.warnings_only,
            episodes=args.episodes,
            policy=ref,
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
    policy: PolicyRef | None = None,
) -> Scanner:
    """Scan JSON lines from `source`, writing verdict lines (or, with `episodes`, loop
    episode lines) to `out`; `policy` names the record `config` came from in every
    verdict."""
    scanner = Scanner(config, policy=policy)
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
