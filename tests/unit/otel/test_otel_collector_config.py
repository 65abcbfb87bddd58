"""ops/otel/collector.yaml: what `loopwatch otel-bridge` relies on in the Collector's
configuration (docs/otel.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from loopwatch.streams.otel.settings import OtelSettings
from loopwatch.streams.otel.spans import ENCODINGS

CONFIG = Path(__file__).resolve().parents[3] / "ops" / "otel" / "collector.yaml"


def _config() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    return document


def _kafka_exporters(config: dict[str, Any]) -> dict[str, Any]:
    pipeline = config["service"]["pipelines"]["traces"]
    names = [name for name in pipeline["exporters"] if name.split("/")[0] == "kafka"]
    return {name: config["exporters"][name] for name in names}


def test_a_traces_pipeline_takes_otlp_to_a_kafka_exporter() -> None:
    config = _config()
    pipeline = config["service"]["pipelines"]["traces"]
    assert "otlp" in pipeline["receivers"] and "otlp" in config["receivers"]
    assert set(config["receivers"]["otlp"]["protocols"]) >= {"grpc", "http"}
    assert _kafka_exporters(config), "the traces pipeline must export to kafka"
    for name in pipeline.get("processors", []):
        assert name in config["processors"]


def test_the_exporter_writes_what_the_bridge_reads_by_default() -> None:
    defaults = OtelSettings.from_env({})
    for exporter in _kafka_exporters(_config()).values():
        assert exporter["brokers"]
        traces = exporter["traces"]
        assert traces["topic"] == defaults.spans_topic
        assert traces["encoding"] == defaults.encoding
        assert traces["encoding"] in ENCODINGS
        # deprecated top-level keys would take precedence over traces::*
        assert "topic" not in exporter and "encoding" not in exporter
