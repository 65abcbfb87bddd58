"""`streams.kafka.faust_ext.recovery_progress`: while a worker rebuilds its table, `/ready`
and the metrics say how many changelog records it has restored of how many (faust keeps
no total), and nothing once the recovery is over."""

from __future__ import annotations

from faust.types import TP
from prometheus_client import CollectorRegistry, generate_latest

from loopwatch.streams.kafka.faust_ext.recovery_progress import (
    ProgressRecovery,
    recovery_progress,
)
from loopwatch.streams.worker.app import create_app
from loopwatch.streams.worker.broker_outage import BrokerOutage
from loopwatch.streams.worker.readiness import Readiness, _Recovery
from tests.stream.settings_for_tests import stream_settings

ZERO, ONE = TP("lw-sessions-changelog", 0), TP("lw-sessions-changelog", 1)


def metrics(app: object) -> str:
    registry = CollectorRegistry()
    registry.register(_Recovery(app))
    return generate_latest(registry).decode()


async def test_ready_and_the_metrics_count_the_records_restored() -> None:
    app = create_app(stream_settings())
    recovery = app.tables.recovery
    assert isinstance(recovery, ProgressRecovery)
    readiness = Readiness(app, "events", BrokerOutage())
    assert recovery_progress(app) is None
    assert "loopwatch_recovery_records_remaining 0.0" in metrics(app)

    # what faust's recovery has built when it starts: where it seeks, the high-water marks
    recovery.active_offsets.update({ZERO: 99, ONE: -1})
    recovery.active_highwaters.update({ZERO: 1099, ONE: 3000})
    recovery._set_recovery_started()
    recovery.active_offsets[ZERO] = 1099  # partition 0 done
    recovery.active_offsets[ONE] = 999  # partition 1 one third of the way
    recovery.records_read += 1500  # (compaction had removed 500 records between them)

    progress = recovery_progress(app)
    assert progress is not None
    assert (progress.to_restore, progress.remaining, progress.restored) == (4001, 2001, 2000)
    assert progress.read == 1500
    ready, document = readiness.check()
    assert not ready
    assert document["recovery"] == {
        "restored": 2000,
        "to_restore": 4001,
        "remaining": 2001,
        "read": 1500,
    }
    assert (
        "recovering the sessions table from its changelog (2000 of 4001 records, 50%)"
        in document["reasons"]
    )
    page = metrics(app)
    assert "loopwatch_recovery_records_remaining 2001.0" in page
    assert "loopwatch_recovery_records_to_restore 4001.0" in page
    assert "loopwatch_recovery_records_read_total 1500.0" in page

    recovery._set_recovery_ended()
    _, document = readiness.check()
    assert "recovery" not in document
    assert "loopwatch_recovery_records_to_restore 0.0" in metrics(app)
    assert "loopwatch_recovery_records_read_total 1500.0" in metrics(app)  # (a counter)

    # a second recovery counts its own records in /ready
    recovery.active_offsets[ONE] = 999
    recovery._set_recovery_started()
    recovery.records_read += 7
    progress = recovery_progress(app)
    assert progress is not None and progress.read == 7


class _Consumer:
    """The consumer's high-water marks as aiokafka last fetched them (None: not yet)."""

    def __init__(self, highwaters: dict[TP, int | None]) -> None:
        self.highwaters = highwaters

    def highwater(self, tp: TP) -> int | None:
        return self.highwaters[tp]


async def test_the_standbys_lag_is_a_gauge() -> None:
    app = create_app(stream_settings())
    recovery = app.tables.recovery
    assert "loopwatch_standby_records_behind 0.0" in metrics(app)  # no standby

    recovery.standby_tps.update({ZERO, ONE})
    # (faust's Counters: `update` would add to them)
    recovery.standby_offsets[ZERO], recovery.standby_offsets[ONE] = 499, None  # ONE: none read
    # what faust read when the standbys started (the high-water mark - 1)
    recovery.standby_highwaters[ZERO], recovery.standby_highwaters[ONE] = 599, 49
    app._consumer = _Consumer({ZERO: None, ONE: None})  # no fetch yet
    assert "loopwatch_standby_records_behind 150.0" in metrics(app)  # 100 + 50

    app._consumer = _Consumer({ZERO: 1000, ONE: 50})  # fetched: 1000 is the next offset
    assert "loopwatch_standby_records_behind 550.0" in metrics(app)  # 500 + 50
    recovery.standby_offsets[ZERO], recovery.standby_offsets[ONE] = 999, 49
    assert "loopwatch_standby_records_behind 0.0" in metrics(app)  # caught up
