"""`OffsetOrder`: per partition, the next offset to process (the offset guard's other half;
why: `offset_guard.py`).

An offset beyond the next expected one means records were dropped: the event is held
back and a timer task (`heal`) seeks the partition back to the first missing offset, so
the events come round again in order. The timer also re-reads a partition whose fetched
records stopped arriving without being processed. Holes that faust already knows
(transaction markers) pass at once; a gap that stays after `MAX_SEEKS_PER_GAP` re-reads
(offsets removed by retention) is accepted, logged, and marked as a gap for faust's
commit bookkeeping.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

MAX_SEEKS_PER_GAP = 5
"""Re-reads (one per second) before a gap is taken as real (offsets gone by retention)."""


def _known_gap(consumer: Any, tp: Any, start: int, end: int) -> bool:
    """Whether faust already knows offsets start..end-1 hold no records (transaction
    markers, compaction), which it notes before handing out the record after them."""
    tree = consumer._gap.get(tp)
    if not tree or end - start > _MAX_GAP_SCAN:
        return False
    return all(tree.overlaps(offset) for offset in range(start, end))


_MAX_GAP_SCAN = 10_000


class OffsetOrder:
    """Per partition of the events topic: the next offset the agent must process."""

    def __init__(self, app: Any) -> None:
        self._app = app  # its consumer is created when the worker starts
        self._next: dict[Any, int] = {}
        # tp -> [first missing offset, offset that revealed the gap, seeks so far]
        self._gaps: dict[Any, list[int]] = {}
        self._stalled: dict[Any, int] = {}  # tp -> expected offset at the previous check
        self.busy = False
        """Set while the agent is inside an event (e.g. waiting for room for its records):
        no partition moves then, and none is stalled for it."""

    def forget(self, tps: set[Any]) -> None:
        """Partitions revoked: their positions start afresh when they come back."""
        for tp in tps:
            self._next.pop(tp, None)
            self._gaps.pop(tp, None)
            self._stalled.pop(tp, None)

    def _expected(self, tp: Any) -> int | None:
        expected = self._next.get(tp)
        if expected is None:
            committed = self._app.consumer._committed_offset.get(tp)
            return None if committed is None else int(committed)
        return expected

    def next_offset(self, tp: Any) -> int | None:
        """The next offset of `tp` to process (None: not known yet)."""
        return self._expected(tp)

    def check(self, tp: Any, offset: int) -> bool:
        """Whether to process this record now. A record past the next expected offset is
        held back (not processed; it comes round again) and its partition re-read."""
        expected = self._expected(tp)
        if expected is None or offset <= expected:
            self._gaps.pop(tp, None)
            return True
        if _known_gap(self._app.consumer, tp, expected, offset):
            return True
        gap = self._gaps.get(tp)
        if gap is None or gap[0] != expected:
            self._gaps[tp] = [expected, offset, 0]
            log.warning(
                "%s[%d]: offsets %d..%d were skipped by the consumer; re-reading them",
                tp.topic, tp.partition, expected, offset - 1,
            )  # fmt: skip
        return False

    def processed(self, tp: Any, offset: int) -> None:
        if offset >= self._next.get(tp, -1):
            self._next[tp] = offset + 1

    async def heal(self, topic: str) -> None:
        """On a timer (never inside the consumer's hand-off of a record, whose read-offset
        bookkeeping a seek made there would race with): seek back every partition with a
        gap, and every partition whose fetch position is past the next offset to process
        with no progress since the previous check (dropped records that were the
        partition's newest, so no later record reveals them)."""
        app = self._app
        if app.rebalancing:
            self._stalled.clear()
            return
        consumer = app.consumer
        # inside a record's hand-off (processed inline), or a fetch's (per batch): not now
        if self.busy or getattr(consumer, "handing_over", False):
            self._stalled.clear()
            return
        for tp, gap in list(self._gaps.items()):
            start, after, seeks = gap
            if seeks >= MAX_SEEKS_PER_GAP:
                log.warning(
                    "%s[%d]: offsets %d..%d stay missing after %d re-reads (retention?); "
                    "going on from %d", tp.topic, tp.partition, start, after - 1, seeks, after,
                )  # fmt: skip
                consumer._gap[tp].addi(start, after)
                self._next[tp] = after
                del self._gaps[tp]
                continue
            gap[2] += 1
            await consumer.seek(tp, start)
        stalled: dict[Any, int] = {}
        for tp in consumer.assignment():
            if tp.topic != topic:
                continue
            expected = self._expected(tp)
            if expected is None:  # never committed, nothing processed: where it started
                expected = consumer.stream_starts.get(tp)
            if expected is None or tp in self._gaps:
                continue
            try:
                position = await consumer.position(tp)
            except Exception as exc:  # e.g. revoked meanwhile: look again next time
                log.debug("position of %s unknown: %r", tp, exc)
                continue
            if position is None or position <= expected:
                continue
            if self._stalled.get(tp) != expected:
                stalled[tp] = expected  # maybe just in flight: look again next time
                continue
            log.warning(
                "%s[%d]: records from offset %d were fetched but not processed; re-reading",
                tp.topic, tp.partition, expected,
            )  # fmt: skip
            await consumer.seek(tp, expected)
        self._stalled = stalled
