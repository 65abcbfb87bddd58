"""The fetch loop goes on as soon as a partition is resumed, where faust sleeps a second.

faust's `Consumer._wait_next_records` sleeps a whole second (`self.sleep(1)`) when no
partition is active. None is between the end of a recovery (the changelog partitions
paused) and the resumption of the stream partitions a few milliseconds later, and the
fetch loop, just done with the last changelog records, comes round in that window: a
worker restarted without local state took its first events a second after `/ready` said
it was ready (docs/performance.md §4, "The first event after a restore").

`WakeOnResume` is faust's method with that sleep replaced by a wait that ends as soon as
a partition becomes active (`resume_partitions`, or an assignment: `_set_active_tps`),
after the call's `timeout`, or when the consumer stops; the partitions are then fetched
in the same call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


class WakeOnResume:
    """A mixin for faust's consumer (`offset_guard.GuardedConsumer`), before faust's
    `Consumer` in the bases: see the module."""

    _resumed: asyncio.Future[None] | None = None

    async def _wait_next_records(self, timeout: float) -> Any:
        this: Any = self
        if not this.flow_active:
            await this.wait(this.can_resume_flow)
        try:
            this.not_waiting_next_records.set()  # (faust sets it on the way in too)
            active: set[Any] | None = None
            if not this.app.client_only:
                active = this._get_active_partitions()
                if not active:
                    await self._until_active(timeout)  # faust: `await self.sleep(1)`
            records: dict[Any, Any] = {}
            if active is None or active:  # faust's live set: resumed partitions are in it
                records = await this._getmany(active_partitions=active, timeout=timeout)
            return records, active
        finally:
            this.not_waiting_next_records.set()

    async def _until_active(self, timeout: float) -> None:
        """Until a partition becomes active, `timeout` passes or the consumer stops."""
        this: Any = self
        self._resumed = asyncio.get_running_loop().create_future()
        try:
            await this.wait_first(self._resumed, timeout=timeout)
        finally:
            self._resumed = None

    def _wake(self) -> None:
        resumed = self._resumed
        if resumed is not None and not resumed.done():
            resumed.set_result(None)

    def resume_partitions(self, tps: Iterable[Any]) -> None:
        super().resume_partitions(tps)  # type: ignore[misc]
        self._wake()

    def _set_active_tps(self, tps: set[Any]) -> set[Any]:
        active: set[Any] = super()._set_active_tps(tps)  # type: ignore[misc]
        if active:
            self._wake()
        return active
