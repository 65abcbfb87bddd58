"""`LoopStopper`, the adapters' `stop_on_loop` option (docs/contract.md §9.13): off by
default, acts only at level 3, once per warning it has not seen, per session."""

from __future__ import annotations

import pytest

from loopwatch.models import LoopWarning
from loopwatch.streams.client.escalation import LoopStopAdvised, LoopStopper
from loopwatch.streams.client.ledger import PlacedWarning


def placed(seq: int, level: int | None, count: int = 4) -> PlacedWarning:
    warning = LoopWarning(
        rule="repeated_result",
        tool_names=("search",),
        count=count,
        threshold=4,
        message="Loop warning.",
        level=level,
    )
    return PlacedWarning(seq=seq, message_index=seq, warning=warning)


LOOP = [placed(1, 1), placed(3, 2), placed(5, 3, count=7)]


def test_off_by_default_never_acts() -> None:
    stopper = LoopStopper()
    assert not stopper.enabled
    stopper.check("s", LOOP)  # no raise
    assert stopper.advised("s", LOOP) is None


def test_true_raises_at_level_three_only_and_once_per_warning() -> None:
    stopper = LoopStopper(True)
    stopper.check("s", LOOP[:2])  # levels 1 and 2: nothing
    with pytest.raises(LoopStopAdvised, match="stop advised: repeated_result on search") as exc:
        stopper.check("s", LOOP)
    assert exc.value.warning.count == 7
    stopper.check("s", LOOP)  # the same warnings again (the wait lists them all): seen
    with pytest.raises(LoopStopAdvised):
        stopper.check("s", [*LOOP, placed(7, 3, count=8)])  # a new one: the loop went on


def test_a_callback_is_called_instead_per_new_warning() -> None:
    seen: list[LoopWarning] = []
    stopper = LoopStopper(seen.append)
    stopper.check("s", LOOP)
    stopper.check("s", LOOP)
    assert [w.count for w in seen] == [7]
    stopper.check("other", LOOP)  # sessions apart
    assert len(seen) == 2
    stopper.forget("s")  # the session ended: a new one under that id starts afresh
    stopper.check("s", LOOP)
    assert len(seen) == 3


def test_a_warning_without_a_level_never_stops() -> None:
    stopper = LoopStopper(True)
    stopper.check("s", [placed(1, None, count=9)])


def test_anything_else_is_refused() -> None:
    with pytest.raises(TypeError, match="stop_on_loop"):
        LoopStopper("yes")  # type: ignore[arg-type]
