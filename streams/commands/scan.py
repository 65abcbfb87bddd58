"""`loopwatch scan FILE...`: detect loops in recorded sessions, offline.

Exit codes (streams.commands.exit_codes, one table for every command): 0 done; 2 bad
options, settings or an unreadable file; 4 `--fail-on-loop` and a warning was found; 5
`--strict` and some line was invalid (it wins over 4: a gate over garbage must not pass,
nor report a loop it could not check fully); 6 no valid event at all (nothing was
checked: an empty input, or every line invalid, e.g. read with the wrong `--format`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable
from contextlib import ExitStack
from typing import IO, Any

from loopwatch.models import TOO_DEEP, AgentEvent, InvalidEvent, decode_event
from loopwatch.streams.commands.detection_options import (
    OptionsError,
    add_detection_options,
    detection_for_files,
)
from loopwatch.streams.commands.exit_codes import (
    EXIT_INVALID_INPUT,
    EXIT_LOOP_FOUND,
    EXIT_NO_EVENTS,
    EXIT_OK,
    EXIT_USAGE,
)
from loopwatch.streams.scan.inputs import (
    EVENTS_FORMAT,
    INPUT_ERRORS,
    open_input,
    sniff,
    transcript_hint,
    transcript_source,
)
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.scan.transcripts import AUTO, InvalidConversation, read_conversations

_PROGRESS_EVERY = 20_000


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "scan",
        help="detect loops in recorded sessions or transcripts (no broker needed)",
        description=(
            "Read events (docs/contract.md §2) as JSON lines, any number of interleaved "
            "sessions, or recorded transcripts (told apart by the input, or --format), "
            "plain or gzip, and print one verdict JSON line per processed event, in input "
            "order (files one after the other, sessions carried across them). Duplicate "
            "and out-of-order events get no line; invalid lines are reported on stderr "
            "with their line number, skipped and counted. Detection settings default to "
            "the worker's (LOOPWATCH_PROFILE, LOOPWATCH_THRESHOLD, ...); a flag overrides "
            "them. Exit codes: 0 done, 2 bad options or unreadable file, 4 --fail-on-loop "
            "and a warning found, 5 --strict and some line was invalid, 6 no valid event "
            "in the input (loopwatch --help lists every code)."
        ),
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="input files (.gz too), or - for standard input"
    )
    add_detection_options(parser)
    parser.add_argument(
        "--warnings-only", action="store_true", help="print only verdicts with a warning"
    )
    parser.add_argument(
        "--fail-on-loop",
        action="store_true",
        help=f"exit {EXIT_LOOP_FOUND} when any warning was found",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {EXIT_INVALID_INPUT} when any line was invalid",
    )
    parser.add_argument(
        "--episodes",
        action="store_true",
        help="print loop episode records (docs/contract.md §8) instead of verdicts: one "
        "line per episode as it closes; episodes still open at the end of the input "
        "last, as expired",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the closing summary on stderr as one JSON object instead of a sentence",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        judged = detection_for_files(args, os.environ)
    except OptionsError as exc:
        return _fail(str(exc))
    scanner = Scanner(judged.config, policy=judged.policy, idle_ttl=judged.idle_ttl)
    with ExitStack() as stack:
        sources: list[tuple[str, IO[bytes]]] = []
        for name in args.files:  # open all first: a typo fails before any output
            try:
                sources.append((name, open_input(name, stack)))
            except OSError as exc:
                return _fail(f"cannot read {name}: {exc.strerror or exc}")
        for name, source in sources:
            try:
                _scan_one(source, name, scanner, args)
            except BrokenPipeError:
                raise  # the reader went away (`| head`): streams.cli stops quietly
            except INPUT_ERRORS as exc:  # a directory, an I/O error, a cut gzip stream
                return _fail(f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}")
    # episodes still open close as expired, printed with --episodes, counted always (the
    # summary counts what --episodes prints)
    still_open = scanner.open_episodes()
    if args.episodes:
        for episode in still_open:
            sys.stdout.buffer.write(episode.to_json() + b"\n")
        sys.stdout.buffer.flush()
    stats = scanner.stats
    if args.json:
        print(json.dumps(stats.to_json(), sort_keys=True), file=sys.stderr)
    else:
        print(f"loopwatch scan: {stats.summary()}", file=sys.stderr)
    if not stats.events:
        return _fail(
            "no valid event in the input, nothing was checked"
            + (" (is --format right? --format auto tells them apart)" if stats.invalid else ""),
            EXIT_NO_EVENTS,
        )
    if args.strict and stats.invalid:
        return EXIT_INVALID_INPUT
    found = sum(stats.warnings.values())
    return EXIT_LOOP_FOUND if args.fail_on_loop and found else EXIT_OK


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"loopwatch scan: {message}", file=sys.stderr)
    return code


def _scan_one(source: IO[bytes], name: str, scanner: Scanner, args: argparse.Namespace) -> None:
    lines: Iterable[bytes] = source
    transcript = args.format not in (AUTO, EVENTS_FORMAT)
    if args.format == AUTO:
        sniffed = sniff(source)
        lines, transcript = sniffed.lines, sniffed.transcript
    out = sys.stdout.buffer
    if transcript:
        scan_transcripts(
            transcript_source(lines),
            out,
            scanner,
            args.format,
            args.warnings_only,
            name=name,
            episodes=args.episodes,
        )
    else:
        scan_lines(lines, out, scanner, args.warnings_only, name=name, episodes=args.episodes)


def scan_lines(
    source: Iterable[bytes],
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
            _skip(scanner, name, number, f"{exc}{transcript_hint(line)}")
            continue
        # One event per line: no list and join as `_write` makes for a conversation.
        try:
            encoded = _encoded(scanner, event, warnings_only, episodes)
        except RecursionError:  # as the worker: a schema dead letter, not a bug
            _skip(scanner, name, number, str(TOO_DEEP))
            continue
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
    except RecursionError:
        _skip(scanner, *where, str(TOO_DEEP))
        return
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
