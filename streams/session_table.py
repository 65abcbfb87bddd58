"""The `sessions` table class: faust's Table, its changelog records sent through `Outputs`.

faust's own `on_key_set` sends each changelog record through `Topic.send_soon` (see
`streams.outputs` for what that costs). This subclass hands them to the worker's batched
outputs instead, to the same changelog partition (the current event's, as faust does).
What it leaves out of faust's version: key TTLs (windowed tables only) and the faust
monitor's table counters (loopwatch's metrics are its own). Without outputs set (under
exactly_once) it is faust's Table unchanged.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.types import TP

from streams.outputs import Outputs


class SessionTable(faust.Table[bytes, bytes]):
    outputs: Outputs | None = None

    def on_key_set(self, key: Any, value: Any) -> None:
        if self.outputs is None:
            super().on_key_set(key, value)
            return
        self.outputs.add_changelog(self._changelog_name(), self._partition(key), key, value)

    def on_key_del(self, key: Any) -> None:
        if self.outputs is None:
            super().on_key_del(key)
            return
        self.outputs.add_changelog(self._changelog_name(), self._partition(key), key, None)

    def on_changelog_delivered(self, topic: str, partition: int, offset: int) -> None:
        """A batch of changelog records was acknowledged: note the offset with the store
        (RocksDB keeps it to resume recovery there; the memory store ignores it)."""
        if topic == self._changelog_name():
            self.data.set_persisted_offset(TP(topic, partition), offset)

    def _changelog_name(self) -> str:
        name: str = self.changelog_topic.get_topic_name()
        return name

    def _partition(self, key: Any) -> int:
        partition = self.partition_for_key(key)  # the current event's partition
        if partition is None:
            raise RuntimeError("the sessions table is written outside of its agent")
        return int(partition)
