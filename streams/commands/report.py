"""`loopwatch report FILE... --out report.html`: loops in recorded sessions, as one page.

It reads what `loopwatch scan` reads (events or transcripts, plain or gzip, `-` for
standard input) and judges with the same options and settings (streams.commands.
detection_options), so a report and a scan of the same input agree loop for loop.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from loopwatch.streams.commands.detection_options import (
    OptionsError,
    add_detection_options,
    detection_for_files,
)
from loopwatch.streams.commands.exit_codes import EXIT_NO_EVENTS, EXIT_OK, EXIT_USAGE
from loopwatch.streams.commands.options import output_file
from loopwatch.streams.fleetview.report import collect, render_html, summary_lines
from loopwatch.streams.scan.inputs import INPUT_ERRORS


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "report",
        help="an HTML report of the loops in recorded sessions (no broker needed)",
        description="Run recorded sessions (events or transcripts, as `loopwatch scan` "
        "reads them, with the same detection options and LOOPWATCH_* settings) through "
        "the detector and write one self-contained HTML page (charts inline, no network): "
        "loops by rule, agent and tool, the sessions with the most loops, repeat counts, "
        "where in a session loops start, and every loop (session, rule, tools, first and "
        "last seq). Prints a short summary.",
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="input files (.gz too), or - for standard input"
    )
    parser.add_argument(
        "--out", type=output_file, default=Path("report.html"), help="default: report.html"
    )
    add_detection_options(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as one JSON object (the page's numbers) instead of text",
    )
    parser.set_defaults(handler=run)


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"loopwatch report: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    try:
        judged = detection_for_files(args, os.environ)
    except OptionsError as exc:
        return _fail(str(exc))
    try:
        data = collect(
            args.files,
            judged.config,
            fmt=args.format,
            policy=judged.policy,
            idle_ttl=judged.idle_ttl,
        )
    except INPUT_ERRORS as exc:
        name = getattr(exc, "filename", None) or "the input"
        return _fail(f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}")
    for error in data.line_errors:
        print(f"loopwatch report: {error} (skipped)", file=sys.stderr)
    if not data.events:
        return _fail("no valid event in the input, nothing was checked", EXIT_NO_EVENTS)
    numbers = data.to_json()
    try:
        args.out.write_text(render_html(numbers), encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot write {args.out}: {exc.strerror}")
    if args.json:
        summary = {key: numbers[key] for key in ("files", "totals", "by_rule", "outcomes")}
        print(json.dumps({**summary, "report": str(args.out)}, sort_keys=True))
        return EXIT_OK
    for line in summary_lines(numbers):
        print(line)
    print(f"report: {args.out}")
    return EXIT_OK
