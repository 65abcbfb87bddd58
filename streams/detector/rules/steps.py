"""The tool-step tracker of the extended rules (docs/contract.md §9): each tool step with
its outcome, shared by `repeated_call_in_turn`, `repeated_cycle` and the result-aware
`repeated_batch`.

* the newest tool step's *outcome* (the results answering its calls before the next
  assistant message) and its *completion* (every distinct call id answered);
* result-aware `repeated_batch` (§9.3): how far back the run of same-batch steps also
  had the same outcome;
* `repeated_call_in_turn` (§9.2): the largest group of identical calls in the newest
  assistant message;
* `repeated_cycle` (§9.4): the last 5 completed units and, per period 2-5, the length of
  the periodic tail, so a new unit costs O(1).

Kept only while one of those rules runs (`RuleSet.kept_for`, docs/contract.md §9.1): a
session judged by the seed profile has no part for it and pays nothing. An outcome
is a multiset of signatures, held as (count, sum of the signatures as 256-bit numbers):
equal multisets give equal pairs, different ones collide with negligible chance. No raw
content: call ids are digests.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopwatch.streams.detector.tools import short_digest

MAX_STEP_IDS = 64
"""A tool step with more distinct call ids has an unknown outcome (contract §9.1): it
equals nothing and never completes; this bounds the pending step's state."""
MAX_PERIOD = 5
PERIODS = (2, 3, 4, 5)
_SUM_MASK = (1 << 256) - 1
UNKNOWN = "?"
"""The outcome of a step with too many call ids: equal to nothing, itself included."""


@dataclass(frozen=True, slots=True)
class Unit:
    """A completed tool step: digest of (batch, outcome) and its tool names."""

    digest: str
    tools: tuple[str, ...]


# never mutated once returned; not frozen: built per event (docs/performance.md)
@dataclass(slots=True)
class Steps:
    """A tracker part: every update returns a new one (a session's state shares it)."""

    # the newest tool step, while its outcome window is open
    ids: frozenset[str] | None = None
    """Digests of its distinct call ids; None: no step, or too many ids (unknown)."""
    open_ids: frozenset[str] = frozenset()
    """Call ids not yet answered; empty once the step completed."""
    batch: str = ""
    tools: tuple[str, ...] = ()
    results: int = 0
    """How many results answered the step so far (the outcome's size)."""
    total: int = 0
    """Sum of those results' signatures (the outcome, with `results`)."""
    joinable: bool = False
    """False once a boundary came after the step: it can no longer join the cycle."""

    # result-aware repeated_batch (§9.3)
    continues: bool = False
    """The newest tool step continues rule 4's run (same batch as the step before it)."""
    last_outcome: str | None = None
    """Outcome of the step before the newest (M_{c-1}); None: none in the run."""
    same_outcomes: int = 0
    """Length of the run ending at M_{c-1} with M_{c-1}'s batch and outcome."""
    aware_run: int = 0
    """Rule 4's result-aware count for the newest tool step."""

    # repeated_call_in_turn (§9.2)
    turn_count: int = 0
    turn_tools: tuple[str, ...] = ()

    # repeated_cycle (§9.4)
    units: tuple[Unit, ...] = ()
    """The last (up to 5) units of S."""
    tails: tuple[int, int, int, int] = (0, 0, 0, 0)
    """Periodic tail length p_L of S for L = 2, 3, 4, 5."""

    def outcome(self) -> str:
        if self.ids is None:
            return UNKNOWN
        return f"{self.results}:{self.total:x}"


EMPTY = Steps()


def _copy(s: Steps) -> Steps:
    # Spelled out: much faster than dataclasses.replace on the per-event path.
    return Steps(
        s.ids,
        s.open_ids,
        s.batch,
        s.tools,
        s.results,
        s.total,
        s.joinable,
        s.continues,
        s.last_outcome,
        s.same_outcomes,
        s.aware_run,
        s.turn_count,
        s.turn_tools,
        s.units,
        s.tails,
    )


_NO_TAILS = (0, 0, 0, 0)


def _abandoned(steps: Steps) -> bool:
    """A new assistant message closes the pending step's window: incomplete, it empties
    the cycle sequence."""
    return steps.joinable and (steps.ids is None or bool(steps.open_ids))


def on_boundary(steps: Steps) -> Steps:
    if not (steps.joinable or steps.turn_count or steps.units):
        return steps
    new = _copy(steps)
    new.joinable = False
    new.turn_count = 0
    new.turn_tools = ()
    new.units = ()
    new.tails = _NO_TAILS
    return new


def on_user_message(steps: Steps) -> Steps:
    """A user message is new intent (issue 31): rule 4's result-aware run and the
    run starts again at the next tool step (§9.3)."""
    if not steps.batch:
        return steps
    new = _copy(steps)
    new.batch = ""
    new.continues = False
    new.last_outcome = None
    new.same_outcomes = 0
    new.aware_run = 0
    return new


def on_text_step(steps: Steps) -> Steps:
    if steps is EMPTY:
        return steps
    if _abandoned(steps) or not steps.units:
        return EMPTY
    return Steps(units=steps.units, tails=steps.tails)


def on_tool_step(
    steps: Steps,
    *,
    batch: str,
    id_digests: list[str],
    fingerprints: list[str],
    names: tuple[str, ...],
    tools: tuple[str, ...],
    continues: bool,
) -> Steps:
    """A tool step: `batch` its batch digest, then per call its id digest, fingerprint and
    name (in order); `tools` the sorted distinct names; `continues`: same batch as the
    tool step before it, with no text step between (rule 4's run goes on)."""
    # Result-aware batches: close the previous step's outcome and extend its run.
    previous: str | None = None
    same_outcomes = 0
    aware_run = 1
    if continues and steps.batch:
        previous = steps.outcome()
        if previous == UNKNOWN:  # equals nothing, not even itself
            same_outcomes = 0
        elif steps.continues and previous == steps.last_outcome:
            same_outcomes = steps.same_outcomes + 1
        else:
            same_outcomes = 1
        aware_run = 1 + same_outcomes
    # Identical calls in this message.
    if len(fingerprints) == 1:
        top, turn_tools = 1, tools
    else:
        counts: dict[str, int] = {}
        for fingerprint in fingerprints:
            counts[fingerprint] = counts.get(fingerprint, 0) + 1
        top = max(counts.values())
        if top > 1:
            pairs = zip(names, fingerprints, strict=True)
            turn_tools = tuple(sorted({name for name, fp in pairs if counts[fp] == top}))
        else:
            turn_tools = tools
    ids = frozenset(id_digests)
    known = len(ids) <= MAX_STEP_IDS
    abandoned = _abandoned(steps)
    return Steps(
        ids if known else None,
        ids if known else frozenset(),
        batch,
        tools,
        0,
        0,
        True,
        continues,
        previous,
        same_outcomes,
        aware_run,
        top,
        turn_tools,
        () if abandoned else steps.units,
        _NO_TAILS if abandoned else steps.tails,
    )


def on_result(steps: Steps, id_digest: str, signature: str | None) -> Steps:
    """A tool result answering `id_digest` with `signature` (None: unsigned)."""
    ids = steps.ids
    if ids is None or id_digest not in ids:
        return steps
    new = _copy(steps)
    new.results += 1
    if signature is not None:
        new.total = (steps.total + int(signature.replace(":", ""), 16)) & _SUM_MASK
    if id_digest not in steps.open_ids:
        return new
    new.open_ids = open_ids = steps.open_ids - {id_digest}
    if open_ids or not steps.joinable:
        return new
    unit = Unit(short_digest(f"{steps.batch}/{new.results}:{new.total:x}"), steps.tools)
    new.units, new.tails = _append(steps.units, steps.tails, unit)
    return new


def _append(
    units: tuple[Unit, ...], tails: tuple[int, int, int, int], unit: Unit
) -> tuple[tuple[Unit, ...], tuple[int, int, int, int]]:
    # Per period L = 2..5: the tail grows when the unit L back equals the new one, else
    # it restarts at min(size + 1, L). Spelled out rather than a closure called four
    # times: this runs for every completed step.
    size = len(units)
    digest = unit.digest
    p2, p3, p4, p5 = tails
    new_tails = (
        p2 + 1 if size >= 2 and digest == units[-2].digest else min(size + 1, 2),
        p3 + 1 if size >= 3 and digest == units[-3].digest else min(size + 1, 3),
        p4 + 1 if size >= 4 and digest == units[-4].digest else min(size + 1, 4),
        p5 + 1 if size >= 5 and digest == units[-5].digest else min(size + 1, 5),
    )
    return (*units, unit)[-MAX_PERIOD:], new_tails
