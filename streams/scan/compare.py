"""Live verdicts against `loopwatch scan`'s for the same input, per session: the same
warnings means the same rule at the same `seq`, warning for warning (`loopwatch replay`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Warned = tuple[int, str]
"""(seq, rule) of one warning."""


@dataclass(frozen=True)
class SessionComparison:
    session_id: str
    expected: tuple[Warned, ...]
    """The scanner's warnings, by seq."""
    live: tuple[Warned, ...]
    """The live worker's warnings, by seq (of the verdicts that arrived)."""
    missing: int
    """Verdicts the scanner gave that did not arrive from the worker."""

    @property
    def verdict(self) -> str:
        if self.missing:
            return "incomplete"
        return "match" if self.live == self.expected else "mismatch"

    def line(self) -> str:
        """One line for the report: the outcome, the session, and what differs."""
        text = f"{self.verdict:<10} {self.session_id}  warnings={len(self.expected)}"
        if self.verdict != "match":
            text += f"  live={_listed(self.live)}  scan={_listed(self.expected)}"
        if self.missing:
            text += f"  missing={self.missing} verdicts"
        return text


def _listed(warned: tuple[Warned, ...]) -> str:
    return ",".join(f"{seq}:{rule}" for seq, rule in warned) or "-"


def compare(
    expected: Mapping[tuple[str, int], str | None],
    live: Mapping[tuple[str, int], str | None],
    sessions: Iterable[str],
) -> list[SessionComparison]:
    """Per session (in `sessions` order): `expected` and `live` map (session, seq) to the
    verdict's warning rule (None: no warning); `live` may lack some or hold others."""
    by_session: dict[str, list[tuple[int, str | None, bool]]] = {}
    for (session_id, seq), rule in expected.items():
        arrived = (session_id, seq) in live
        by_session.setdefault(session_id, []).append((seq, rule, arrived))
    live_warnings: dict[str, list[Warned]] = {}
    for (session_id, seq), rule in live.items():
        if rule is not None:
            live_warnings.setdefault(session_id, []).append((seq, rule))
    results = []
    for session_id in sessions:
        rows = sorted(by_session.get(session_id, ()))
        wanted = tuple((seq, rule) for seq, rule, _ in rows if rule is not None)
        got = tuple(sorted(live_warnings.get(session_id, ())))
        missing = sum(1 for _, _, arrived in rows if not arrived)
        results.append(SessionComparison(session_id, wanted, got, missing))
    return results
