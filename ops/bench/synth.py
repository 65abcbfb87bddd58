"""Deterministic, loop-dense, realistic agent sessions as loopwatch v1 events (docs/contract.md §2).

    python ops/bench/synth.py --sessions 200 --events 100000 --seed 7 > synth.jsonl

Each session mixes what coding agents really do and how they get stuck: reading a file
page by page and re-reading pages (rule 3), retrying a failing edit (rule 1), re-running
a failing test command (rule 2), re-issuing the same parallel batch (rule 4), plus user
turns, text steps and successful work. Results carry realistic amounts of text, so that
fingerprinting costs what it costs in production. Sessions are interleaved, each in
order, and each ends with `session_end`. The same arguments always give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
WORDS = (
    "def",
    "class",
    "return",
    "self",
    "value",
    "result",
    "config",
    "state",
    "event",
    "session",
    "import",
    "from",
    "if",
    "else",
    "for",
    "while",
    "try",
    "except",
    "raise",
    "None",
    "True",
    "False",
    "async",
    "await",
    "yield",
    "lambda",
    "with",
    "as",
    "pass",
)


class _Session:
    """The events of one session, produced in order by `events()`."""

    def __init__(self, session_id: str, rng: random.Random, agent_id: str) -> None:
        self.session_id = session_id
        self.agent_id = agent_id
        self.rng = rng
        self.seq = -1
        self.calls = 0
        self.files = [f"src/pkg/module_{rng.randrange(10_000)}.py" for _ in range(12)]
        self.contents = {path: self._text(40) for path in self.files}

    def _text(self, lines: int) -> str:
        rng = self.rng
        return "\n".join(
            "    " * rng.randrange(3) + " ".join(rng.choices(WORDS, k=rng.randrange(3, 12)))
            for _ in range(lines)
        )

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        ts = EPOCH + timedelta(seconds=self.seq)
        return {
            "v": 1,
            "type": kind,
            "session_id": self.session_id,
            "seq": self.seq,
            "ts": ts.isoformat().replace("+00:00", "Z"),
            "agent_id": self.agent_id,
            **fields,
        }

    def _call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        return {"id": f"call_{self.session_id}_{self.calls}", "name": name, "arguments": arguments}

    def _step(
        self, calls: list[dict[str, Any]], outcomes: list[tuple[Any, str | None]]
    ) -> Iterator[dict[str, Any]]:
        yield self._event("assistant_message", text=None, tool_calls=calls)
        for call, (result, error) in zip(calls, outcomes, strict=True):
            yield self._event(
                "tool_result",
                call_id=call["id"],
                tool_name=call["name"],
                result=result,
                error=error,
            )

    def _read(self, path: str, offset: int | str | None) -> tuple[dict[str, Any], Any]:
        args: dict[str, Any] = {"path": path, "limit": 20}
        if offset is not None:
            args["offset"] = offset
        start = int(offset or 0)
        lines = self.contents[path].split("\n")[start : start + 20]
        result = {"content": "\n".join(lines), "lines": len(lines), "elapsed_ms": start}
        return self._call("read_file", args), result

    def episodes(self) -> Iterator[dict[str, Any]]:
        rng = self.rng
        yield self._event("system_message", text="You are a coding agent. " + self._text(3))
        yield self._event("user_message", text="Fix the failing test. " + self._text(2))
        while True:
            kind = rng.choices(
                ("paging", "edit_loop", "test_loop", "batch_loop", "work", "user", "text"),
                weights=(4, 3, 3, 2, 5, 1, 2),
            )[0]
            path = rng.choice(self.files)
            if kind == "paging":  # page through a file, going back to pages already seen
                for _ in range(rng.randrange(2, 8)):
                    offset = rng.choice((None, 0, "0", 20, 20, 40))
                    call, result = self._read(path, offset)
                    yield from self._step([call], [(result, None)])
            elif kind == "edit_loop":  # the same failing edit, again and again
                edit = {"path": path, "old_string": self._text(1), "new_string": self._text(1)}
                error = f"old_string not found in {path}"
                for _ in range(rng.randrange(1, 5)):
                    call = self._call(rng.choice(("edit_file", "fs__edit_file")), dict(edit))
                    yield from self._step([call], [(None, error)])
            elif kind == "test_loop":  # the same failing test run
                output = "FAILED tests/test_x.py::test_y\n" + self._text(15)
                for _ in range(rng.randrange(1, 6)):
                    call = self._call("bash", {"command": "pytest -x -q tests/test_x.py"})
                    yield from self._step([call], [({"stdout": output, "exit_code": 1}, None)])
            elif kind == "batch_loop":  # the same parallel batch, in any order
                names = [
                    ("read_many_files", {"paths": [path, "README.md"]}),
                    ("grep", {"pattern": "def handler", "path": "src"}),
                ]
                for _ in range(rng.randrange(1, 5)):
                    rng.shuffle(names)
                    calls = [self._call(name, dict(args)) for name, args in names]
                    outcomes = [({"matches": self._text(5)}, None) for _ in calls]
                    yield from self._step(calls, outcomes)
            elif kind == "work":  # ordinary progress: varied calls, mostly successful
                name, args = rng.choice(
                    (
                        ("edit_file", {"path": path, "old_string": "a", "new_string": "b"}),
                        ("bash", {"command": f"ls {path}"}),
                        ("grep", {"pattern": rng.choice(WORDS), "path": path}),
                        ("read_file", {"path": path, "offset": rng.randrange(0, 40, 10)}),
                    )
                )
                call = self._call(name, args)
                ok = rng.random() < 0.85
                yield from self._step(
                    [call], [(self._text(8) if ok else None, None if ok else "exit status 2")]
                )
            elif kind == "user":
                yield self._event("user_message", text=self._text(2))
            else:
                yield self._event("assistant_message", text=self._text(2), tool_calls=[])

    def events(self, count: int) -> Iterator[dict[str, Any]]:
        """`count` events: the session's episodes, then `session_end` as the last one."""
        episodes = self.episodes()
        for _ in range(max(count - 1, 0)):
            yield next(episodes)
        yield self._event("session_end")


def session(session_id: str, count: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """One session of `count` events (the last is `session_end`)."""
    rng = random.Random(f"{seed}:{session_id}")
    return _Session(session_id, rng, agent_id="synth-agent").events(count)


def generate(sessions: int, events: int, seed: int = 0, first: int = 0) -> Iterator[dict[str, Any]]:
    """About `events` events over `sessions` interleaved sessions (each in order).

    `first`: the index of the first session (ids `synth-<seed>-<first>`, ...), so that a
    large fleet can be made a block of sessions at a time: a session holds ~20 KB of
    file texts while its events are made. The sessions' own events do not depend on it;
    the interleaving of a block does (`first` 0: as before it existed)."""
    rng = random.Random(seed if first == 0 else f"{seed}:{first}")
    sizes = [events // sessions] * sessions
    for index in range(events - sum(sizes)):
        sizes[index % sessions] += 1
    streams = [
        session(f"synth-{seed}-{first + n:05d}", size, seed)
        for n, size in enumerate(sizes)
        if size > 0
    ]
    while streams:
        index = rng.randrange(len(streams))
        event = next(streams[index], None)
        if event is None:
            streams[index] = streams[-1]
            streams.pop()
            continue
        yield event


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    out = sys.stdout
    for event in generate(args.sessions, args.events, args.seed):
        out.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
