"""`loopwatch scan FILE...`: detect loops in recorded sessions, offline.

Exit codes: 0 done; 1 `--fail-on-loop` and a warning was found; 2 bad options, settings
or an unreadable file; 3 `--strict` and some line was invalid (it wins over 1: a gate
over garbage must not pass, nor report a loop it could not check fully).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable
from contextlib import ExitStack
from typing import IO, Any

from loopwatch.models import (
    DEFAULT_KEY,
    AgentEvent,
    ConfigError,
    InvalidEvent,
    InvalidPolicy,
    Policy,
    PolicyRef,
    decode_event,
    parse_policy,
)
from loopwatch.streams.client.history import FORMATS
from loopwatch.streams.commands.detection_options import (
    add_threshold_options,
    detection_config,
    session_ttl,
)
from loopwatch.streams.commands.exit_codes import EXIT_OK, EXIT_USAGE
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.scan.transcripts import (
    InvalidConversation,
    looks_like_transcript,
    read_conversations,
)
from loopwatch.streams.settings import SettingsError

EXIT_LOOP_FOUND = 1
"""`--fail-on-loop` and a warning was found."""
EXIT_INVALID_INPUT = 3
"""`--strict` and some input line was invalid."""

_PROGRESS_EVERY = 20_000
EVENTS_FORMAT = "events"


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "scan",
        help="detect loops in recorded sessions or transcripts (no broker needed)",
        description=(
            "Read events (docs/contract.md §2) as JSON lines, any number of interleaved "
            "sessions, or recorded transcripts (--format openai|anthropic|responses), and "
            "print one verdict JSON line per processed event, in input order (files one "
            "after the other, sessions carried across them). Duplicate and out-of-order "
            "events get no line; invalid lines are reported on stderr with their line "
            "number, skipped and counted. Detection settings default to the worker's "
            "(LOOPWATCH_PROFILE, LOOPWATCH_THRESHOLD, ...); a flag overrides them. "
            "Exit codes: 0 done, 1 --fail-on-loop and a warning found, 2 bad options or "
            "unreadable file, 3 --strict and some line was invalid."
        ),
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="input files, or - for standard input"
    )
    parser.add_argument(
        "--format",
        choices=(EVENTS_FORMAT, *FORMATS),
        default=EVENTS_FORMAT,
        help="events (default: loopwatch events, one per line), or transcripts: openai "
        "(Chat messages), anthropic (Messages), responses (Responses API input items); "
        "a transcript file is one JSON array of messages or one conversation per line",
    )
    add_threshold_options(parser)
    parser.add_argument(
        "--profile",
        choices=("seed", "extended"),
        help="seed (the default: the four rules of docs/contract.md §4) or extended (§9)",
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
    parser.add_argument("--strict", action="store_true", help="exit 3 when any line was invalid")
    parser.add_argument(
        "--episodes",
        action="store_true",
        help="print loop episode records (docs/contract.md §8) instead of verdicts: one "
        "line per episode as it closes; episodes still open at the end of the input "
        "last, as expired",
    )
    parser.set_defaults(handler=run)


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
            config = detection_config(args, os.environ)
        else:
            policy = _policy(args.policy)
            config, ref = policy.config, policy.ref
    except ConfigError as exc:
        print(f"loopwatch scan: invalid config: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SettingsError as exc:
        print(f"loopwatch scan: invalid setting: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except InvalidPolicy as exc:
        print(f"loopwatch scan: invalid policy {args.policy}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.files.count("-") > 1:
        print("loopwatch scan: standard input (-) can be read only once", file=sys.stderr)
        return EXIT_USAGE
    try:
        idle_ttl = session_ttl(os.environ)
    except SettingsError as exc:
        print(f"loopwatch scan: invalid setting: {exc}", file=sys.stderr)
        return EXIT_USAGE
    scanner = Scanner(config, policy=ref, idle_ttl=idle_ttl)
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
                if args.format == EVENTS_FORMAT:
                    scan_lines(
                        source,
                        sys.stdout.buffer,
                        scanner,
                        args.warnings_only,
                        name=name,
                        episodes=args.episodes,
                    )
                else:
                    scan_transcripts(
                        source,
                        sys.stdout.buffer,
                        scanner,
                        args.format,
                        args.warnings_only,
                        name=name,
                        episodes=args.episodes,
                    )
            except BrokenPipeError:
                raise  # the reader went away (`| head`): streams.cli stops quietly
            except OSError as exc:  # e.g. a directory, or an I/O error mid-file
                print(f"loopwatch scan: cannot read {name}: {exc.strerror}", file=sys.stderr)
                return EXIT_USAGE
    if args.episodes:
        for episode in scanner.open_episodes():
            sys.stdout.buffer.write(episode.to_json() + b"\n")
        sys.stdout.buffer.flush()
    print(f"loopwatch scan: {scanner.stats.summary()}", file=sys.stderr)
    if args.strict and scanner.stats.invalid:
        return EXIT_INVALID_INPUT
    found = sum(scanner.stats.warnings.values())
    return EXIT_LOOP_FOUND if args.fail_on_loop and found else EXIT_OK


def scan_lines(
    source: IO[bytes],
    out: IO[bytes],
    scanner: Scanner,
    warnings_only: bool = False,
    *,
    name: str = "-",
    episodes: bool = False,
) -> Scanner:
    """Scan JSON lines of events from `source` with `scanner`, writing verdict lines (or,
    with `episodes`, the episodes they closed) to `out`. An invalid line is reported on
    stderr, counted in `scanner.stats.invalid` and skipped."""
    progress = sys.stderr.isatty()
    started = time.monotonic()
    write = out.write
    for number, line in enumerate(source, start=1):
        try:
            event = decode_event(line)
        except InvalidEvent as exc:
            if not line.strip():  # a blank line is no event (tested here: it is rare)
                continue
            hint = (
                f"; a transcript? try --format {'|'.join(FORMATS)}"
                if looks_like_transcript(line)
                else ""
            )
            _skip(scanner, name, number, f"{exc}{hint}")
            continue
        # One event per line: no list and join as `_write` makes for a conversation.
        try:
            encoded = _encoded(scanner, event, warnings_only, episodes)
        except Exception as exc:  # reported for its line, as `_write` does; the scan goes on
            _skip(scanner, name, number, f"internal: {type(exc).__name__}")
            continue
        if encoded:
            write(encoded)
        if progress and number % _PROGRESS_EVERY == 0:
            rate = number / max(time.monotonic() - started, 1e-9)
            print(f"\r  {number:,} lines, {rate:,.0f}/s", end="", file=sys.stderr, flush=True)
    if progress:
        print("\r", end="", file=sys.stderr)
    out.flush()
    return scanner


def scan_transcripts(
    source: IO[bytes],
    out: IO[bytes],
    scanner: Scanner,
    fmt: Any,
    warnings_only: bool = False,
    *,
    name: str = "-",
    episodes: bool = False,
) -> Scanner:
    """Scan recorded transcripts (streams.scan.transcripts) as `scan_lines` scans events."""
    for conversation in read_conversations(source, fmt, name=name):
        if isinstance(conversation, InvalidConversation):
            reason, number = conversation.args
            _skip(scanner, name, number, reason)
            continue
        _write(
            scanner,
            conversation.events,
            out,
            warnings_only=warnings_only,
            episodes=episodes,
            where=(name, conversation.line),
        )
    out.flush()
    return scanner


def _write(
    scanner: Scanner,
    events: Iterable[AgentEvent],
    out: IO[bytes],
    *,
    warnings_only: bool,
    episodes: bool,
    where: tuple[str, int],
) -> None:
    # A detector or encoding failure is reported for its line; the scan goes on.
    try:
        encoded = [_encoded(scanner, event, warnings_only, episodes) for event in events]
    except Exception as exc:
        _skip(scanner, *where, f"internal: {type(exc).__name__}")
        return
    out.write(b"".join(encoded))


def _encoded(scanner: Scanner, event: AgentEvent, warnings_only: bool, episodes: bool) -> bytes:
    """The output lines of one event: its verdict (none for a duplicate, or without a
    warning under `warnings_only`), or with `episodes` the loop episodes it closed."""
    verdict = scanner.judge(event)
    if episodes:
        return b"".join(episode.to_json() + b"\n" for episode in scanner.closed_episodes)
    if verdict is not None and (verdict.warning is not None or not warnings_only):
        return verdict.to_json() + b"\n"
    return b""


def _skip(scanner: Scanner, name: str, number: int, reason: str) -> None:
    scanner.stats.invalid += 1
    print(f"loopwatch scan: {name}: line {number}: skipped, {reason}", file=sys.stderr)
