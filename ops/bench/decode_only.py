"""A plain aiokafka consumer that only decodes: the floor under any faust path.

    .venv/bin/python ops/bench/decode_only.py BOOTSTRAP TOPIC GROUP COUNT RESULT_FILE

One `AIOKafkaConsumer` in a group of its own (earliest offsets, aiokafka's defaults
otherwise) reads the topic with `getmany` and decodes each record's value with
`loopwatch.models.decode_event` (what the worker's pipeline does first), nothing else: no
table, no sends, no commits. After COUNT records it writes to RESULT_FILE, as JSON, the
wall-clock times of the first, the 10%, the 90% and the last record (as
`bare_agent.py`); then the parent stops it. `worker_bench.py` runs it over the same
records as the bare faust agent and the worker, in the same run.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from aiokafka import AIOKafkaConsumer
from progress_marks import ProgressMarks

from loopwatch.models import InvalidEvent, decode_event


async def run(bootstrap: str, topic: str, group: str, count: int, result_file: str) -> None:
    marks = ProgressMarks(count, result_file)
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    await consumer.start()
    try:
        n = bad = 0
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for record in records:
                    try:
                        decode_event(record.value or b"")
                    except InvalidEvent:
                        bad += 1  # none in the bench's records; counted, not raised
                    n += 1
                    marks.record(n)
    finally:
        await consumer.stop()


def main() -> None:
    bootstrap, topic, group, count, result_file = sys.argv[1:6]
    asyncio.run(run(bootstrap, topic, group, int(count), result_file))


if __name__ == "__main__":
    main()
