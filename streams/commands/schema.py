"""`loopwatch schema`: write the JSON Schema of events, verdicts and loop episodes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from loopwatch.models.schema import episode_schema, event_schema, verdict_schema
from loopwatch.streams.commands.exit_codes import EXIT_OK, EXIT_USAGE
from loopwatch.streams.commands.options import output_dir


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "schema",
        help="write the JSON Schema of events, verdicts and loop episodes",
        description="Write agent-event.schema.json, loop-verdict.schema.json and "
        "loop-episode.schema.json (JSON Schema 2020-12) for runtimes in other languages.",
    )
    parser.add_argument(
        "--out",
        type=output_dir,
        help="directory to write the files into; created if only it is missing "
        "(default: print one JSON object)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    schemas = {
        "agent-event.schema.json": event_schema(),
        "loop-verdict.schema.json": verdict_schema(),
        "loop-episode.schema.json": episode_schema(),
    }
    if args.out is None:
        json.dump(schemas, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return EXIT_OK
    out: Path = args.out
    try:
        out.mkdir(exist_ok=True)
        for name, schema in schemas.items():
            (out / name).write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
            print(f"wrote {out / name}", file=sys.stderr)
    except OSError as exc:
        print(f"loopwatch schema: cannot write to {out}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
