"""Replaying recorded sessions turn by turn, as a runtime would live: wait for the verdict
of the newest event and build the prompt before every assistant turn.

Sources: the built-in sessions (`streams.demo.builtin`) and, when present, event files
in the format of docs/contract.md §2 (e.g. `../shared/data/trajectories/*.jsonl`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from loopwatch.streams.client import Call
from loopwatch.streams.demo.conversation import Conversation, Outcome

Role = Literal["system", "user", "assistant", "results"]


@dataclass(frozen=True)
class Turn:
    """One message of a recorded session (`results`: every tool result of one step)."""

    role: Role
    text: str | None = None
    calls: tuple[Call, ...] = ()
    outcomes: tuple[Outcome, ...] = ()


@dataclass(frozen=True)
class Recording:
    name: str
    agent_id: str
    turns: tuple[Turn, ...]


async def replay(conv: Conversation, turns: Iterable[Turn]) -> None:
    for turn in turns:
        if turn.role == "system":
            await conv.system(turn.text or "")
        elif turn.role == "user":
            await conv.user(turn.text or "")
        elif turn.role == "assistant":
            await conv.prompt()
            await conv.assistant(turn.text, turn.calls)
        else:
            await conv.results(turn.outcomes)


def recordings_from_events(path: Path, limit: int | None = None) -> Iterator[Recording]:
    """The sessions of an events file (JSON lines, sessions possibly interleaved)."""
    sessions: dict[str, list[dict[str, Any]]] = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                event = json.loads(line)
                sessions.setdefault(event["session_id"], []).append(event)
    for count, (session_id, events) in enumerate(sessions.items()):
        if limit is not None and count >= limit:
            return
        events.sort(key=lambda e: e["seq"])
        agent = events[0].get("agent_id") or path.stem
        yield Recording(session_id, agent, tuple(_turns(events)))


def _turns(events: list[dict[str, Any]]) -> Iterator[Turn]:
    calls: dict[str, Call] = {}
    pending: list[Outcome] = []
    for event in events:
        kind = event["type"]
        if kind != "tool_result" and pending:
            yield Turn("results", outcomes=tuple(pending))
            pending = []
        if kind in ("system_message", "user_message"):
            yield Turn("system" if kind == "system_message" else "user", event.get("text") or "")
        elif kind == "assistant_message":
            step = tuple(
                Call(c["id"], c["name"], c.get("arguments", {})) for c in event["tool_calls"]
            )
            calls = {c.id: c for c in step}
            yield Turn("assistant", event.get("text"), calls=step)
        elif kind == "tool_result":
            call = calls.get(event["call_id"]) or Call(event["call_id"], event["tool_name"])
            pending.append(Outcome(call, event.get("result"), event.get("error")))
    if pending:
        yield Turn("results", outcomes=tuple(pending))
