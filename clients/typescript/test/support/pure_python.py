"""What the Python client's pure parts make of the conformance histories, for the
TypeScript unit test to compare with its own: `history_events` of every history, and the
placement of warnings at every message (one at a time, then all at once).

    python pure_python.py FIXTURE   # prints one JSON document
"""

from __future__ import annotations

import json
import sys

from loopwatch.streams.client import history_events, place_anthropic, place_openai, place_responses

PLACE = {"openai": place_openai, "anthropic": place_anthropic, "responses": place_responses}


def tool_error(result):
    text = result.get("content")
    return text if isinstance(text, str) and text.startswith("Error") else None


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        fixture = json.load(f)
    out = []
    for history in fixture["histories"]:
        fmt, messages = history["format"], history["messages"]
        events = history_events(messages, fmt, tool_error if fmt == "openai" else None)
        place = PLACE[fmt]
        single = [canonical(place(messages, {i: [f"w{i}", "again"]})) for i in range(len(messages))]
        every = canonical(place(messages, {i: [f"w{i}"] for i in range(len(messages))}))
        out.append(
            {
                "events": [
                    canonical({"kind": e.kind, "message_index": e.message_index, **e.body()})
                    for e in events
                ],
                "single": single,
                "every": every,
            }
        )
    json.dump(out, sys.stdout, ensure_ascii=False)


main()
