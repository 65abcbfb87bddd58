"""Shared by the framework adapter tests: a scripted tool loop and what to check."""

from __future__ import annotations

import json
from typing import Any

from loopwatch.streams.client import MARKER
from loopwatch.streams.detector.warning import LEVEL_TEXTS

LOOP_STEPS = 3  # the same call and result thrice: repeated_result (and repeated_batch)
VERDICT_TIMEOUT = 30.0  # generous: a slow CI machine must not fail open
STOP_STEPS = 10
"""A loop long enough for a level-3 warning under `extended` (docs/contract.md §9.13): the
fourth identical result warns, two model calls later it insists, two more and it
advises stopping, from the eighth repeat on."""
_STOP_SENTENCE = LEVEL_TEXTS[3].strip()


def search_arguments(step: int, *, looping: bool) -> dict[str, Any]:
    """The looping agent searches for the same thing; the clean one changes its query."""
    return {"query": "direct flights SFO JFK" if looping else f"query number {step}"}


def search_result(arguments: dict[str, Any]) -> str:
    """The tool: nothing found, the same answer for the same query."""
    return f"no results for {arguments['query']}"


def warnings_in(request: Any) -> list[str]:
    """The loopwatch warnings anywhere in a model request (any framework's objects)."""
    text = json.dumps(request, default=lambda o: getattr(o, "__dict__", str(o)))
    return [part for part in text.split('"') if part.startswith(MARKER)]


def assert_warned_before_the_last_call_only(requests: list[Any], clean: list[Any]) -> None:
    """The looping run's model requests: no warning until the one after the third
    repeat, which has one; the clean run's: none at all."""
    assert len(requests) == LOOP_STEPS + 1
    assert [warnings_in(r) for r in requests[:LOOP_STEPS]] == [[]] * LOOP_STEPS
    assert warnings_in(requests[LOOP_STEPS])  # the helper sees them where they are
    assert [warnings_in(r) for r in clean] == [[]] * (LOOP_STEPS + 1)


def first_stop_advised(requests: list[Any]) -> int:
    """The index of the first model request that carries a level-3 warning ("stop
    advised"); fails when none does."""
    found = [i for i, r in enumerate(requests) if any(_STOP_SENTENCE in w for w in warnings_in(r))]
    assert found, "no request carried a stop-advised warning"
    return found[0]
