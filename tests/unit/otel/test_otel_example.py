"""examples/otel_agent_loop.py: its looping agent is warned and its careful one is not,
once its spans have been through the bridge's mapping and ordering (the example against
the real broker runs in tests/integration/test_otel_bridge_kafka.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.otel_spans import bridge_events, rules

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "otel_agent_loop.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("otel_agent_loop", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_the_example_agents_loop_and_do_not() -> None:
    example = load_example()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    example.run_agent(tracer, "looping", "a", example.LOOPING)
    example.run_agent(tracer, "clean", "b", example.CLEAN)
    spans = exporter.get_finished_spans()
    for encoding in ("otlp_proto", "otlp_json"):
        events = bridge_events([example.encode_request(spans, encoding)], encoding)
        looping = rules([e for e in events if e.session_id == "looping"])
        clean = rules([e for e in events if e.session_id == "clean"])
        assert {"repeated_failed_mutation", "repeated_read_range"} <= set(looping)
        assert (
            clean == [None] * len(clean) and len(clean) == 8
        )  # 3 tool steps with 4 results, 1 text
