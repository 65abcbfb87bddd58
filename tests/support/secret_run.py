"""A fleet board fed from sessions whose tool arguments, results and errors all hold a
secret marker: what the fleet page serves must never show it."""

from __future__ import annotations

from loopwatch.models import DetectionConfig
from loopwatch.streams.fleetview.board import FleetBoard
from loopwatch.streams.scan.scanner import Scanner
from tests.support.builders import SessionBuilder

SECRET = "SECRET-MARKER-7f3a9c"


def board_of_a_secret_run() -> tuple[FleetBoard, list[str]]:
    """A board fed the verdicts and episodes of sessions whose tool arguments, results
    and errors all hold SECRET; and the events' JSON (the control: SECRET is in them)."""
    events = []
    for n in range(2):
        b = SessionBuilder(f"sess-{n}", agent_id=f"agent-{n}")
        b.user("fix it")
        for _ in range(3):
            b.call("edit_file", {"path": f"/{SECRET}/x.py", "old": SECRET, "new": "b"})
            b.result(error=f"no match for {SECRET}")
        for _ in range(3):
            b.call("read_file", {"path": f"/{SECRET}/y.py"})
            b.result(result=f"{SECRET} contents")
        b.end()
        events.extend(b.events)
    board = FleetBoard()
    scanner = Scanner(DetectionConfig())
    for event in events:
        verdict = scanner.judge(event)
        if verdict is not None:
            board.add_warning(verdict)
        for episode in scanner.closed_episodes:
            board.add_episode(episode)
    assert board.warnings >= 2 and board.episodes >= 2
    return board, [event.model_dump_json() for event in events]
