"""The worker's Prometheus exposition: per-event counters and the latency histogram."""

from __future__ import annotations

from loopwatch.streams.worker.metrics import Metrics


def _samples(metrics: Metrics) -> dict[str, float]:
    text = metrics.exposition().decode()
    return {
        name: float(value)
        for name, value in (line.rsplit(" ", 1) for line in text.splitlines() if line[:1] != "#")
    }


def test_event_and_verdict_counters() -> None:
    metrics = Metrics()
    for event_type in ("user_message", "tool_result", "tool_result"):
        metrics.count_event(event_type)
    metrics.count_verdict()
    metrics.count_verdict()
    samples = _samples(metrics)
    assert samples['loopwatch_events_total{type="user_message"}'] == 1
    assert samples['loopwatch_events_total{type="tool_result"}'] == 2
    assert samples["loopwatch_verdicts_total"] == 2


def test_latency_histogram_buckets_are_cumulative_and_bounds_inclusive() -> None:
    metrics = Metrics()
    for seconds in (0.001, 0.003, 0.003, 0.2, 30.0):
        metrics.observe_latency(seconds)
    samples = _samples(metrics)
    bucket = "loopwatch_event_to_verdict_seconds_bucket"
    assert samples[f'{bucket}{{le="0.001"}}'] == 1  # an observation on a bound counts there
    assert samples[f'{bucket}{{le="0.0025"}}'] == 1
    assert samples[f'{bucket}{{le="0.005"}}'] == 3
    assert samples[f'{bucket}{{le="0.25"}}'] == 4
    assert samples[f'{bucket}{{le="10.0"}}'] == 4
    assert samples[f'{bucket}{{le="+Inf"}}'] == 5
    assert samples["loopwatch_event_to_verdict_seconds_count"] == 5
    assert abs(samples["loopwatch_event_to_verdict_seconds_sum"] - 30.207) < 1e-9


def test_an_empty_registry_still_exposes_every_family() -> None:
    samples = _samples(Metrics())
    assert samples["loopwatch_verdicts_total"] == 0
    assert samples['loopwatch_event_to_verdict_seconds_bucket{le="+Inf"}'] == 0
    assert samples["loopwatch_active_sessions"] == 0


def test_labelled_counters_count_per_label_set_through_their_cached_children() -> None:
    metrics = Metrics()
    metrics.count_warning("repeated_result", "agent-a")
    metrics.count_warning("repeated_result", "agent-a")
    metrics.count_warning("repeated_batch", None)
    metrics.count_expired("idle")
    metrics.count_expired("ended")
    metrics.count_expired("idle")
    # a child got through labels() elsewhere (app.py does so) is the one counted here
    metrics.warnings.labels("repeated_result", "agent-a").inc()
    samples = _samples(metrics)
    warnings = "loopwatch_warnings_total"
    assert samples[f'{warnings}{{agent_id="agent-a",rule="repeated_result"}}'] == 3
    assert samples[f'{warnings}{{agent_id="",rule="repeated_batch"}}'] == 1
    assert samples['loopwatch_sessions_expired_total{reason="idle"}'] == 2
    assert samples['loopwatch_sessions_expired_total{reason="ended"}'] == 1
