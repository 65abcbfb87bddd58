"""Rule 6, repeated_cycle (docs/contract.md §9.4): the completed tool steps since the
latest boundary end in a cycle of 2-5 different steps (calls and results identical each
time) repeated `cycle_threshold` times: `ls` → `read a` → `ls` → `read a` → ...

The smallest period whose repetitions reach the threshold in force for its tools wins.
"""

from __future__ import annotations

from loopwatch.models import DetectionConfig
from loopwatch.streams.detector.rules.base import Hit, Rule
from loopwatch.streams.detector.rules.steps import PERIODS, Steps
from loopwatch.streams.detector.rules.steps_tracker import STEPS
from loopwatch.streams.detector.tools import short_digest


class RepeatedCycle(Rule[Steps]):
    name = "repeated_cycle"
    tracker = STEPS
    applies_policy = True
    template = (
        "Loop warning (repeated_cycle): the same sequence of tool steps ({tools}) has "
        "now run {count} times with the same results each time. Break the cycle: use "
        "what these steps already returned, try a different approach, or report the "
        "blocker."
    )

    def check(self, part: Steps, config: DetectionConfig) -> Hit | None:
        if len(part.units) < 2:
            return None
        # No period can match below the lowest threshold that could be in force: r_L =
        # p_L // L reaches `lowest` only if p_L >= L * lowest (the common case is none).
        lowest = config.cycle_threshold
        if config.tool_thresholds:
            lowest = min(lowest, *config.tool_thresholds.values())
        p2, p3, p4, p5 = part.tails
        if p2 < 2 * lowest and p3 < 3 * lowest and p4 < 4 * lowest and p5 < 5 * lowest:
            return None
        for period, names, repetitions in cycles(part, lowest):
            limit = config.threshold_for(self.name, names)
            if limit is not None and repetitions >= limit:
                # The same whichever unit of the cycle came last: sorted unit digests.
                units = sorted(unit.digest for unit in part.units[-period:])
                return Hit(names, repetitions, limit, short_digest(",".join(units)))
        return None


RULE = RepeatedCycle()


def cycles(steps: Steps, at_least: int) -> list[tuple[int, tuple[str, ...], int]]:
    """(period, tool names, repetitions) for each period 2-5 with at least `at_least`
    repetitions whose last L units are not all equal, smallest period first: the
    threshold in force for the names decides which one matches."""
    units = steps.units
    found = []
    for period, tail in zip(PERIODS, steps.tails, strict=True):
        if len(units) < period:
            break
        repetitions = tail // period
        if repetitions < at_least:
            continue
        last = units[-period:]
        if all(unit.digest == last[0].digest for unit in last):
            continue
        names = tuple(sorted({name for unit in last for name in unit.tools}))
        found.append((period, names, repetitions))
    return found
