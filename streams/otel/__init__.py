"""`loopwatch otel-bridge`: OpenTelemetry GenAI spans (as the Collector's Kafka exporter
writes them) turned into loopwatch events on `agent-events` (docs/contract.md §10).

* `spans`: one OTLP record (`otlp_proto` or `otlp_json`) → plain spans. Pure.
* `mapping`: a GenAI span → a `SpanRecord` keyed by session, with digests only. Pure.
* `ordering`: per-session reorder window, turns, `seq`, dedup → events. Pure.
* `settings`, `app`: the bridge's own settings and faust app (two stages, one app).
"""
