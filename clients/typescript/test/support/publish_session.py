"""Publish the conformance sessions with the Python client (`loopwatch.streams.client`).

    python publish_session.py FIXTURE SESSION_PREFIX LOCAL(0|1)

Broker and topics from KAFKA_BOOTSTRAP_SERVERS, LOOPWATCH_EVENTS_TOPIC and
LOOPWATCH_VERDICTS_TOPIC. Event times come from a fixed clock (the fixture's start, one
millisecond per event), as in the TypeScript run. Prints one JSON document: the prompts
of every step and whether each wait got its verdict.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import datetime, timedelta

from loopwatch.streams.client import LoopwatchClient


def tool_error(result):
    text = result.get("content")
    return text if isinstance(text, str) and text.startswith("Error") else None


async def main() -> None:
    fixture_path, prefix, local = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    with open(fixture_path, encoding="utf-8") as f:
        fixture = json.load(f)
    start = datetime.fromisoformat(fixture["start"].replace("Z", "+00:00"))
    ticks = iter(range(10**9))

    def clock() -> datetime:
        return start + timedelta(milliseconds=next(ticks))

    out = {"prompts": [], "complete": []}
    async with LoopwatchClient(
        bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        events_topic=os.environ["LOOPWATCH_EVENTS_TOPIC"],
        verdicts_topic=os.environ["LOOPWATCH_VERDICTS_TOPIC"],
        local_fingerprints=local,
        verdict_timeout=20.0,
        clock=clock,
    ) as client:
        for n, history in enumerate(fixture["histories"]):
            fmt = history["format"]
            tracker = await client.tracker(
                f"{prefix}-{n}", fmt, tool_error=tool_error if fmt == "openai" else None
            )
            prompts = []
            for step in history["steps"]:
                prompts.append(
                    await tracker.prompt(history["messages"][:step], system=history.get("system"))
                )
                out["complete"].append(tracker.last_wait.complete)
            out["prompts"].append(prompts)
    json.dump(out, sys.stdout, ensure_ascii=False)


asyncio.run(main())
