"""A bare faust agent: reads a topic as raw bytes and does nothing else (the ceiling).

    .venv/bin/python ops/bench/bare_agent.py BOOTSTRAP TOPIC APP_ID COUNT RESULT_FILE

faust-streaming with its defaults (memory store, its Monitor sensor, no table, no
sends), one agent with concurrency 1 over `stream.events()`, as the worker's. After COUNT
records it writes to RESULT_FILE, as JSON, the wall-clock times at which the first, the
10%, the 90% and the last record were handed to the agent; then the parent stops it.
`worker_bench.py` runs it over the same records as the worker, in the same run.
"""

from __future__ import annotations

import sys

import faust
from progress_marks import ProgressMarks


def main() -> None:
    bootstrap, topic_name, app_id, count_text, result_file = sys.argv[1:6]
    count = int(count_text)
    marks = ProgressMarks(count, result_file)
    app = faust.App(
        app_id,
        broker=f"kafka://{bootstrap}",
        store="memory://",
        topic_allow_declare=False,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        web_enabled=False,
        autodiscover=False,
        key_serializer="raw",
        value_serializer="raw",
    )
    topic = app.topic(topic_name, key_type=bytes, value_type=bytes)

    @app.agent(topic)
    async def bare(stream: faust.StreamT[bytes]) -> None:
        n = 0
        async for _event in stream.events():
            n += 1
            marks.record(n)

    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn"]
    app.main()


if __name__ == "__main__":
    main()
