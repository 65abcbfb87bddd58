"""The worker's processing-health counter and its deprecated alias (docs/metrics.md)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from loopwatch.streams.worker.readiness import ProcessingHealth, _ProcessingCrashes


def test_crashes_are_exported_under_the_new_name_and_the_old_alias() -> None:
    health = ProcessingHealth()
    registry = CollectorRegistry()
    registry.register(_ProcessingCrashes(health))
    health.crashed(RuntimeError("boom"))
    health.crashed(ValueError("again"))

    page = generate_latest(registry).decode()

    assert "loopwatch_processing_crashes_total 2.0" in page
    assert "loopwatch_agent_crashes_total 2.0" in page
    assert health.last_error == "ValueError" and health.stalled
    health.processed += 1
    assert not health.stalled
