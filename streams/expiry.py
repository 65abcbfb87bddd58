"""Which sessions to delete, by event time: idle ones after the TTL, ended ones after a
short retention (kept so replayed events of an ended session stay duplicates).

Time is event time per partition: a partition's clock is the newest event `ts` it has seen,
so expiry happens while processing an event of that partition, which is where faust lets
the agent write the table (the deleted key lives in the same partition).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass
class _PartitionIndex:
    deadlines: dict[str, float] = field(default_factory=dict)
    heap: list[tuple[float, str]] = field(default_factory=list)
    """(deadline, session) with stale entries skipped lazily; rebuilt when it grows."""
    clock: float = float("-inf")


class ExpiryIndex:
    """Deadlines of the sessions of each partition this worker holds."""

    def __init__(self, idle_ttl: timedelta, ended_retention: timedelta) -> None:
        self._idle_ttl = idle_ttl.total_seconds()
        self._ended_retention = ended_retention.total_seconds()
        self._partitions: dict[int, _PartitionIndex] = {}

    def touch(self, partition: int, session_id: str, last_ts: datetime, *, ended: bool) -> None:
        """Record a session's newest event time (from an agent write or the changelog)."""
        self.touch_at(partition, session_id, last_ts.timestamp(), ended=ended)

    def touch_at(self, partition: int, session_id: str, last: float, *, ended: bool) -> None:
        """`touch` with the event time as epoch seconds (`datetime.timestamp()`): the
        pipeline converts each event's time once for `touch_at` and `due_at` (on
        pydantic's tzinfo a conversion costs ~0.5 us)."""
        index = self._partitions.get(partition)
        if index is None:  # (not setdefault: it would build an index on every call)
            index = self._partitions[partition] = _PartitionIndex()
        deadline = last + (self._ended_retention if ended else self._idle_ttl)
        index.deadlines[session_id] = deadline
        heapq.heappush(index.heap, (deadline, session_id))
        if len(index.heap) > 2 * len(index.deadlines) + 1024:
            index.heap = [(d, s) for s, d in index.deadlines.items()]
            heapq.heapify(index.heap)

    def forget(self, partition: int, session_id: str) -> None:
        index = self._partitions.get(partition)
        if index is not None:
            index.deadlines.pop(session_id, None)

    def drop_partition(self, partition: int) -> None:
        """The partition went to another worker."""
        self._partitions.pop(partition, None)

    def sessions(self) -> int:
        return sum(len(index.deadlines) for index in self._partitions.values())

    def due(self, partition: int, event_ts: datetime) -> list[str]:
        """Advance the partition's clock to `event_ts`; return the sessions past their
        deadline (and forget them)."""
        return self.due_at(partition, event_ts.timestamp())

    def due_at(self, partition: int, now: float) -> list[str]:
        """`due` with the event time as epoch seconds (`datetime.timestamp()`)."""
        index = self._partitions.get(partition)
        if index is None:
            return []
        index.clock = max(index.clock, now)
        expired: list[str] = []
        while index.heap and index.heap[0][0] < index.clock:
            deadline, session_id = heapq.heappop(index.heap)
            if index.deadlines.get(session_id) == deadline:
                del index.deadlines[session_id]
                expired.append(session_id)
        return expired
