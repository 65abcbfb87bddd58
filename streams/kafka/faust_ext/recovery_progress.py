"""How far a table recovery has come: records restored out of those to restore.

faust's recovery service knows, per changelog partition, the offset it seeks to and the
partition's high-water mark, but keeps no total: `/ready` and the metrics said only
"recovering" for as long as a big table took to rebuild (minutes). `ProgressRecovery`
notes how many records were left when a recovery started; `RecoveryProgress` reads it
with what is left now. Offsets count compacted-away records too, so the figures are an
upper bound on records read, and exact at the end; `read` counts the records themselves.
`standby_records_behind` says how far this worker's standby partitions lag their
changelog (faust logs it once, when the standbys start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faust.tables.manager import TableManager
from faust.tables.recovery import Recovery

from loopwatch.streams.kafka.faust_ext.batch_recovery import BatchRecovery


@dataclass(frozen=True)
class RecoveryProgress:
    """One reading of a recovery under way."""

    to_restore: int
    """Changelog records left when the recovery started (all partitions it restores)."""
    remaining: int
    """Records left now."""
    read: int = 0
    """Records read since the recovery started (fewer than `restored` where compaction
    removed records between the offsets)."""

    @property
    def restored(self) -> int:
        return max(0, self.to_restore - self.remaining)

    @property
    def fraction(self) -> float:
        return 1.0 if self.to_restore <= 0 else self.restored / self.to_restore


class ProgressRecovery(BatchRecovery):
    """faust's recovery service (per batch of records: `BatchRecovery`), noting what it
    has to restore when it starts."""

    to_restore: int = 0
    read_before: int = 0
    """`records_read` when the recovery under way started."""

    def _set_recovery_started(self) -> None:
        super()._set_recovery_started()
        # the offsets to seek to and the high-water marks are built by now
        self.to_restore = int(self.active_remaining_total())
        self.read_before = self.records_read


class ProgressTableManager(TableManager):
    """faust's table manager with `ProgressRecovery` (the app's `TableManager` setting)."""

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = ProgressRecovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery


def recovery_progress(app: Any) -> RecoveryProgress | None:
    """The progress of `app`'s table recovery, or None when none is under way."""
    if not app.in_recovery:
        return None
    recovery = app.tables.recovery
    remaining = int(recovery.active_remaining_total())
    read = getattr(recovery, "records_read", 0) - getattr(recovery, "read_before", 0)
    return RecoveryProgress(getattr(recovery, "to_restore", remaining), remaining, read)


def records_read(app: Any) -> int:
    """Changelog records of active partitions that `app`'s recoveries have read since the
    process started."""
    return int(getattr(app.tables.recovery, "records_read", 0))


def standby_records_behind(app: Any) -> int:
    """Changelog records this worker's standby partitions have yet to read: per standby
    partition, its high-water mark as the consumer last fetched it (before a fetch, the
    one faust read when the standby started) less the offset the standby has read. A
    take-over by this worker reads these first (plus its buffer of up to
    `table_standby_buffer_size` records per partition not yet written to the store)."""
    recovery = app.tables.recovery
    if not recovery.standby_tps:
        return 0
    behind = 0
    for tp in list(recovery.standby_tps):
        last = recovery.standby_highwaters.get(tp)  # faust's: the high-water mark - 1
        try:  # aiokafka's: None before a fetch of `tp`; raises once it is unassigned
            fetched = app.consumer.highwater(tp)
        except Exception:  # (rebalancing: the next scrape reads the new assignment)
            fetched = None
        if fetched is not None:
            last = fetched - 1
        offset = recovery.standby_offsets.get(tp)
        if last is not None:
            behind += max(0, last - (-1 if offset is None else offset))
    return behind
