"""The live fleet board (streams.fleetview.board): tallies from warnings and episodes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from loopwatch.models import LoopEpisode, LoopVerdict, LoopWarning, RuleName
from loopwatch.streams.fleetview import board as board_module
from loopwatch.streams.fleetview.board import (
    OTHER,
    BoundedCounter,
    FleetBoard,
    time_to_break_bucket,
)

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)


def warned(
    session: str,
    seq: int,
    *,
    rule: RuleName = "repeated_result",
    tools: tuple[str, ...] = ("bash",),
    count: int = 3,
    agent: str | None = "coder",
    at: datetime | None = None,
) -> LoopVerdict:
    moment = at or T0 + timedelta(seconds=seq)
    return LoopVerdict(
        session_id=session,
        seq=seq,
        agent_id=agent,
        event_ts=moment,
        evaluated_at=moment,
        warning=LoopWarning(rule=rule, tool_names=tools, count=count, threshold=3, message="m"),
    )


def episode(
    session: str,
    first_seq: int,
    last_seq: int,
    *,
    rule: RuleName = "repeated_result",
    outcome: str = "broken",
    warnings: int = 1,
    tools: tuple[str, ...] = ("bash",),
) -> LoopEpisode:
    start, end = T0 + timedelta(seconds=first_seq), T0 + timedelta(seconds=last_seq)
    return LoopEpisode.model_validate(
        {
            "session_id": session,
            "agent_id": "coder",
            "rule": rule,
            "subject": "sha256:abc",
            "tool_names": tools,
            "first_seq": first_seq,
            "last_seq": last_seq,
            "started_at": start,
            "ended_at": end,
            "peak_count": 3,
            "warnings": warnings,
            "outcome": outcome,
            "duration_seconds": (end - start).total_seconds(),
        }
    )


def test_warnings_of_one_loop_count_once_and_an_episode_closes_it() -> None:
    board = FleetBoard()
    for seq in (4, 5, 6):
        board.add_warning(warned("s1", seq, count=seq - 1))
    board.add_warning(warned("s2", 3, rule="repeated_batch", tools=("ls", "pwd"), agent="ops"))
    snap = board.snapshot()
    assert snap["totals"] == {
        "warnings": 4,
        "loops": 2,
        "open": 2,
        "closed": 0,
        "episodes": 0,
        "skipped": 0,
    }
    assert snap["by_rule"]["repeated_result"] == 1
    assert snap["by_rule"]["repeated_batch"] == 1
    assert dict(snap["top_agents"]) == {"coder": 1, "ops": 1}
    assert dict(snap["top_tools"]) == {"bash": 1, "ls": 1, "pwd": 1}
    assert snap["open_loops"][1]["peak_count"] == 5
    assert snap["open_loops"][1]["warnings"] == 3

    board.add_episode(episode("s1", 4, 7, warnings=3))
    snap = board.snapshot()
    assert snap["totals"]["open"] == 1
    assert snap["totals"]["loops"] == 2  # the episode closed a loop already counted
    assert snap["outcomes"] == {"broken": 1}
    assert snap["broken_first"] == {"loops": 0, "closed": 1}
    assert snap["recent"][0]["session_id"] == "s1"
    assert "subject" not in snap["recent"][0]  # names only, no digests on the page


def test_broken_after_the_first_warning_and_time_to_break() -> None:
    board = FleetBoard()
    board.add_episode(episode("a", 10, 12, warnings=1))  # 2 s
    board.add_episode(episode("b", 10, 40, warnings=2))  # 30 s
    board.add_episode(episode("c", 10, 11, outcome="session_ended"))
    board.add_episode(episode("a", 10, 12, warnings=1))  # redelivered: ignored
    snap = board.snapshot()
    assert snap["broken_first"] == {"loops": 1, "closed": 3}
    counts = dict(
        zip(snap["time_to_break"]["labels"], snap["time_to_break"]["counts"], strict=True)
    )
    assert counts["1-5 s"] == 1
    assert counts["15-60 s"] == 1
    assert sum(counts.values()) == 2  # only broken loops have a time to break
    assert snap["time_to_break"]["median_seconds"] == 30.0
    assert snap["totals"]["loops"] == 3  # begun before the page read their warnings


def test_without_episodes_an_unwarned_event_between_warnings_ends_the_loop() -> None:
    board = FleetBoard(episodes_expected=False)
    board.add_warning(warned("s1", 4))
    board.add_warning(warned("s1", 5))
    board.add_warning(warned("s1", 9))  # seq 6-8 had no warning: a second loop
    assert board.snapshot()["totals"]["loops"] == 2
    board.add_warning(warned("s1", 9))  # redelivered
    assert board.snapshot()["totals"]["loops"] == 2


def test_with_episodes_a_loop_counts_once_whichever_topic_is_read_first() -> None:
    board = FleetBoard()
    board.add_episode(episode("s1", 4, 7, warnings=2))  # read before its warnings
    board.add_warning(warned("s1", 4))
    board.add_warning(warned("s1", 5))
    assert board.snapshot()["totals"]["loops"] == 1
    assert board.snapshot()["totals"]["open"] == 0
    # a later loop of the same session and rule, its warnings read before the first's end
    board.add_warning(warned("s2", 4))
    board.add_warning(warned("s2", 9))  # no inference: the episodes will say
    board.add_episode(episode("s2", 4, 6))
    assert board.snapshot()["totals"]["loops"] == 3
    assert board.snapshot()["totals"]["open"] == 1  # the second loop of s2 goes on
    board.add_episode(episode("s2", 9, 12))
    assert board.snapshot()["totals"]["loops"] == 3
    assert board.snapshot()["totals"]["open"] == 0


def test_loops_per_minute_by_rule_in_event_time() -> None:
    board = FleetBoard()
    board.add_warning(warned("s1", 1, at=T0))
    board.add_warning(warned("s2", 1, rule="repeated_batch", at=T0 + timedelta(seconds=30)))
    board.add_warning(warned("s3", 1, at=T0 + timedelta(minutes=2)))
    series = board.snapshot()["per_minute"]
    assert series["minutes"][-1] == "10:02"
    assert len(series["minutes"]) == board_module.MIN_MINUTES  # a young board
    assert series["series"]["repeated_result"][-3:] == [1, 0, 1]
    assert series["series"]["repeated_batch"][-3:] == [1, 0, 0]


def test_quiet_loops_leave_open_now_and_state_stays_bounded() -> None:
    board = FleetBoard()
    board.add_warning(warned("old", 1, at=T0))
    board.add_warning(warned("new", 1, at=T0 + board_module.QUIET_AFTER + timedelta(seconds=1)))
    assert [row["session_id"] for row in board.snapshot()["open_loops"]] == ["new"]
    for n in range(board_module.MINUTES + 5):
        board.add_warning(warned(f"m{n}", 1, at=T0 + timedelta(minutes=n)))
    assert len(board._per_minute) <= board_module.MINUTES
    assert len(board.snapshot()["per_minute"]["minutes"]) == board_module.MINUTES


def test_counted_names_are_capped() -> None:
    counter = BoundedCounter(cap=2)
    for name in ("a", "b", "c", "d", "a"):
        counter.add(name)
    assert dict(counter.counts) == {"a": 2, "b": 1, OTHER: 2}


def test_time_to_break_buckets_have_exclusive_upper_bounds() -> None:
    assert time_to_break_bucket(0.0) == 0
    assert time_to_break_bucket(1.0) == 1
    assert time_to_break_bucket(10_000.0) == len(board_module.TIME_TO_BREAK_BUCKETS) - 1


def test_the_snapshot_is_json() -> None:
    board = FleetBoard()
    board.add_warning(warned("s1", 4))
    board.add_episode(episode("s1", 4, 6))
    board.add_skipped()
    assert json.loads(json.dumps(board.snapshot()))["totals"]["skipped"] == 1
