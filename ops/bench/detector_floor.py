"""`loopwatch worker` without detection: what the Kafka and table layers cost alone.

    python -m detector_floor worker   (ops/bench on the path; worker_bench.py --floor)

The worker as it is (faust app, batch hand-off, session table and its changelog, outputs,
offset commits, metrics), with the pipeline's per-event work (`pipeline._process`)
replaced: the event is decoded, its session's record read, and the record written back
with the event's seq and time and the verdict as unconfirmed, as the real pipeline
does; the verdict is the one the detector gave the first event, sent again for every
event. No fingerprints, rules, episodes or expiry, and the stored state stays that of
one event. A bench tool only: the worker's throughput against this floor says how much
of its time is the detector and its state, and what the rest of the worker could reach.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

from loopwatch.models import decode_event
from loopwatch.streams.cli import main
from loopwatch.streams.detector import SessionState, observe_episodes
from loopwatch.streams.kafka.expiry import ExpiryIndex
from loopwatch.streams.worker import pipeline
from loopwatch.streams.worker.record import SessionRecord
from loopwatch.streams.worker.store import SessionStore


class _FirstVerdict:
    """The detector's verdict and state after the first event, kept for every event."""

    def __init__(self) -> None:
        self.verdict: Any = None
        self.payload = b""
        self.state: SessionState | None = None

    def of(self, event: Any, options: pipeline.PipelineOptions, now: datetime) -> None:
        if self.verdict is None:
            observation = observe_episodes(None, event, options.detection, evaluated_at=now)
            self.verdict, self.state = observation.verdict, observation.state
            self.payload = observation.verdict.to_json()


_FIRST = _FirstVerdict()


def _floor(
    key: bytes | None,
    value: bytes | None,
    store: SessionStore,
    options: pipeline.PipelineOptions,
    expiry: ExpiryIndex,
    *,
    partition: int,
    now: datetime,
    log_time: float | None = None,
) -> pipeline.Outcome:
    assert value is not None  # the bench's records all have one
    event = decode_event(value)
    _FIRST.of(event, options, now)
    previous = store.get(event.session_id)
    state = previous.state if previous is not None else None
    seen = log_time if log_time is not None else now.timestamp()
    record = SessionRecord(
        state or _FIRST.state,
        event.seq,
        event.ts,
        ((event.seq, _FIRST.payload),),
        (),
        seen,
        seen,
    )
    store.set(event.session_id, record)
    return pipeline.Processed(event, _FIRST.verdict, _FIRST.payload, record)


if __name__ == "__main__":
    pipeline._process = _floor  # type: ignore[assignment]  # the point of this module
    sys.exit(main())
