"""What one session has published and which verdicts came back (pure, no I/O).

It answers two questions for a runtime: "has the verdict of my newest event arrived?"
and "which warnings go after which message of my history?" (for `placement`).

A warning normally belongs to the message whose event produced it. A verdict that
arrives late (after a wait gave up and the prompt was already built past its message)
would, placed there, change a prompt prefix the model has already seen; it is anchored
to the newest message at the time it is first handed out instead, so it only appends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from loopwatch.models import LoopVerdict, LoopWarning


@dataclass(frozen=True)
class PlacedWarning:
    """A warning with the history message it is placed after."""

    seq: int
    """The seq of the event that produced it."""
    message_index: int | None
    """Index of the message in the runtime's history; None when the event had none."""
    warning: LoopWarning
    """The warning itself."""


class Ledger:
    """Published seqs, received verdicts and the anchors of their warnings."""

    def __init__(self) -> None:
        self.last_seq: int | None = None
        """The seq of the newest published event."""
        self.received_through: int | None = None
        """The highest seq whose verdict has arrived."""
        self._message_of: dict[int, int] = {}
        self._newest_message: int | None = None
        self._unplaced: list[tuple[LoopVerdict, int | None]] = []
        self._placed: list[PlacedWarning] = []
        self._handed_through: int | None = None  # newest seq at the previous hand-out

    def published(self, seq: int, message_index: int | None) -> None:
        """Record an event: its seq, and the history message it came from."""
        self.last_seq = seq
        if message_index is not None:
            self._message_of[seq] = message_index
            self._newest_message = max(message_index, self._newest_message or 0)

    def received(self, verdict: LoopVerdict) -> bool:
        """Record a verdict; False for one already seen (redelivered after a restart)."""
        if self.received_through is not None and verdict.seq <= self.received_through:
            return False
        self.received_through = verdict.seq
        anchor = self._message_of.get(verdict.seq)
        # Seqs were inserted in increasing order: drop those answered, keep the map small.
        for seq in list(self._message_of):
            if seq > verdict.seq:
                break
            del self._message_of[seq]
        if verdict.warning is not None:
            self._unplaced.append((verdict, anchor))
        return True

    def has_verdict(self, through_seq: int) -> bool:
        return self.received_through is not None and self.received_through >= through_seq

    def placed(self) -> list[PlacedWarning]:
        """The warnings handed out so far, with their anchors. Reads only."""
        return list(self._placed)

    def hand_out(self) -> list[PlacedWarning]:
        """Anchor the warnings received since the last hand-out, then every warning handed
        out so far; call it when building a prompt. A warning whose event is not newer
        than the previous hand-out's newest event is late: it is anchored to the newest
        message instead of its own."""
        for verdict, own_message in self._unplaced:
            assert verdict.warning is not None
            anchor = own_message
            late = self._handed_through is not None and verdict.seq <= self._handed_through
            if late and own_message is not None and self._newest_message is not None:
                anchor = self._newest_message
            self._placed.append(PlacedWarning(verdict.seq, anchor, verdict.warning))
        self._unplaced.clear()
        self._handed_through = self.last_seq
        return self.placed()


def warnings_by_message(
    placed: Iterable[PlacedWarning], index_of: Callable[[int], int | None] | None = None
) -> dict[int, list[str]]:
    """Warning texts keyed by message index, as `placement` takes them. `index_of` maps a
    warning's message index to the index in the history being sent (None: left out, e.g.
    trimmed away); by default the index is kept."""
    by_message: dict[int, list[str]] = {}
    for warning in placed:
        index = warning.message_index
        if index is not None and index_of is not None:
            index = index_of(index)
        if index is not None:
            by_message.setdefault(index, []).append(warning.warning.message)
    return by_message
