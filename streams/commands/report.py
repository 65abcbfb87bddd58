"""`loopwatch report FILE... --out report.html`: loops in recorded sessions, as one page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from loopwatch.models import ConfigError
from loopwatch.streams.commands.detection_options import add_threshold_options, detection_config
from loopwatch.streams.commands.exit_codes import EXIT_USAGE
from loopwatch.streams.commands.options import output_file
from loopwatch.streams.fleetview.report import collect, render_html, summary_lines


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "report",
        help="an HTML report of the loops in recorded sessions (no broker needed)",
        description="Run event files (JSON lines, as `loopwatch scan` reads) through the "
        "detector and write one self-contained HTML page (charts inline, no network): "
        "loops by rule, agent and tool, the sessions with the most loops, repeat counts "
        "and where in a session loops start. Prints a short summary.",
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="event files")
    parser.add_argument(
        "--out", type=output_file, default=Path("report.html"), help="default: report.html"
    )
    add_threshold_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = detection_config(args)
    except ConfigError as exc:
        print(f"loopwatch report: invalid config: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        data = collect(args.files, config)
    except OSError as exc:
        print(f"loopwatch report: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    for error in data.line_errors:
        print(f"loopwatch report: {error} (skipped)", file=sys.stderr)
    numbers = data.to_json()
    try:
        args.out.write_text(render_html(numbers), encoding="utf-8")
    except OSError as exc:
        print(f"loopwatch report: cannot write {args.out}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    for line in summary_lines(numbers):
        print(line)
    print(f"report: {args.out}")
    return 0
