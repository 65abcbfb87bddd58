"""When each partition of the events topic processes again: one probe session per
partition gets an event every `interval` seconds (a paced producer), and the first verdict
of each (partition, seq) is noted with its arrival time, so that after a kill the seconds
until a partition's first verdict of an event produced after the kill can be read per
partition (`first_after`). Used by `failover_bench.py` and `scale_bench.py --takeover`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner


@dataclass
class Verdicts:
    """Arrival times of verdicts, by partition of their session."""

    seen: set[tuple[int, int]] = field(default_factory=set)
    """(partition, seq) that got a verdict."""
    arrivals: list[tuple[float, int, int]] = field(default_factory=list)
    """(monotonic time, partition, seq) of each first verdict."""

    def first_after(self, since: float, first_seq: int, partition: int) -> float | None:
        """Seconds from `since` to the first verdict of `partition` for an event of
        `first_seq` or later (one produced after `since`)."""
        for when, part, seq in self.arrivals:
            if part == partition and seq >= first_seq and when >= since:
                return when - since
        return None


def partition_sessions(prefix: str, partitions: int) -> dict[str, int]:
    """A session id per partition whose key the default partitioner puts there (the
    partition a runtime's keyed event of it would go to)."""
    choose, every = DefaultPartitioner(), list(range(partitions))
    sessions: dict[int, str] = {}
    n = 0
    while len(sessions) < partitions:
        session = f"{prefix}{n}"
        sessions.setdefault(choose(session.encode(), every, every), session)
        n += 1
    return {session: partition for partition, session in sessions.items()}


class PartitionProbes:
    """The paced probe sessions (`produce`) and their verdicts (`read_verdicts`); both
    run until `stop` is set. The verdict reader starts at the end of the verdicts topic
    (a loaded topic's older verdicts are not read) before the first probe is sent."""

    def __init__(
        self,
        bootstrap: str,
        events_topic: str,
        verdicts_topic: str,
        *,
        partitions: int,
        interval: float,
        prefix: str = "probe-",
    ) -> None:
        self.bootstrap = bootstrap
        self.events_topic = events_topic
        self.verdicts_topic = verdicts_topic
        self.partitions = partitions
        self.interval = interval
        self.sessions = partition_sessions(prefix, partitions)
        self.verdicts = Verdicts()
        self.seq = 0
        """The seq of the next round of probes (one event per partition)."""
        self._reading = asyncio.Event()

    async def produce(self, stop: asyncio.Event) -> None:
        await self._reading.wait()
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=0, acks="all")
        await producer.start()
        try:
            while not stop.is_set():
                now = datetime.now(UTC).isoformat()
                for session, partition in self.sessions.items():
                    event = {
                        "type": "user_message",
                        "session_id": session,
                        "seq": self.seq,
                        "ts": now,
                    }
                    await producer.send(
                        self.events_topic,
                        json.dumps(event).encode(),
                        key=session.encode(),
                        partition=partition,
                    )
                self.seq += 1
                with contextlib.suppress(TimeoutError):  # pacing the load, not synchronisation
                    await asyncio.wait_for(stop.wait(), self.interval)
        finally:
            await producer.stop()

    async def read_verdicts(self, stop: asyncio.Event, verdict_partitions: int) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(self.verdicts_topic, p) for p in range(verdict_partitions)]
            consumer.assign(tps)
            await consumer.seek_to_end(*tps)
            for tp in tps:
                await consumer.position(tp)
            self._reading.set()
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                now = time.monotonic()
                for batch in batches.values():
                    for record in batch:
                        verdict = json.loads(record.value)
                        partition = self.sessions.get(verdict["session_id"])
                        key = (partition, verdict["seq"])
                        if partition is not None and key not in self.verdicts.seen:
                            self.verdicts.seen.add(key)
                            self.verdicts.arrivals.append((now, partition, verdict["seq"]))
        finally:
            self._reading.set()  # (a reader that failed: the producer sees `stop` then)
            await consumer.stop()

    def first_after(self, since: float, first_seq: int, partition: int) -> float | None:
        return self.verdicts.first_after(since, first_seq, partition)

    async def all_partitions_after(
        self, since: float, first_seq: int, deadline: float, partitions: list[int] | None = None
    ) -> bool:
        """Wait until every partition (of `partitions`, by default all) has a verdict for
        an event of `first_seq` or later."""
        wanted = range(self.partitions) if partitions is None else partitions
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if all(self.first_after(since, first_seq, p) is not None for p in wanted):
                return True
            await asyncio.sleep(0.1)  # polling the reader's record, not synchronisation
        return False

    @contextlib.asynccontextmanager
    async def running(self, verdict_partitions: int):  # type: ignore[no-untyped-def]
        """The producer and the reader as tasks while the block runs."""
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self.produce(stop)),
            asyncio.create_task(self.read_verdicts(stop, verdict_partitions)),
        ]
        try:
            yield self
        finally:
            stop.set()
            await asyncio.gather(*tasks)
