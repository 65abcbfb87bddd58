"""Instrumented agent loops, for the otel-bridge's tests (tests/otel_spans.py) and its
bench (otel_bench.py): spans made by the OpenTelemetry SDK with the GenAI attributes,
encoded by OpenTelemetry's own OTLP encoder into one `ExportTraceServiceRequest` per
record, as the Collector's Kafka exporter writes them (`otlp_proto`: the protobuf bytes;
`otlp_json`: OTLP/JSON, ids in hex, enums as numbers). Needs the `otel` extra's SDK."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

Style = Literal["sibling", "child"]
"""`sibling`: tool spans beside the chat span under invoke_agent; `child`: inside it."""

START_NS = 1_796_000_000_000_000_000  # 2026-11-30, an arbitrary fixed instant
STEP_NS = 1_000_000  # 1 ms between consecutive span boundaries


@dataclass(frozen=True)
class Tool:
    """One tool call of a model turn and how it ended."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = "ok"
    error: str | None = None
    recorded_arguments: Any = None
    """The `gen_ai.tool.call.arguments` attribute as is (default: JSON of `arguments`)."""


Turn = Sequence[Tool]
"""The tool calls of one model turn; empty: a text answer."""


@dataclass
class InstrumentedAgent:
    """One agent process: a TracerProvider whose finished spans are kept in memory."""

    agent_id: str = "coder"
    record_content: bool = True
    """Opt-in `gen_ai.tool.call.arguments` / `.result` recorded, or only names."""
    style: Style = "sibling"
    strict: bool = False
    """The conventions to the letter: conversation and agent ids only on the invoke_agent
    and chat spans (none on execute_tool spans)."""
    operation: str = "chat"
    """The model call's operation name (`generate_content`, `text_completion`, ...)."""
    processors: Sequence[SpanProcessor] = ()
    """Span processors before the exporter's (e.g. ConversationSpanProcessor)."""
    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)

    def __post_init__(self) -> None:
        provider = TracerProvider(resource=Resource.create({"service.name": "test-agent"}))
        for processor in self.processors:
            provider.add_span_processor(processor)
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self._tracer = provider.get_tracer("loopwatch.otel_agent")
        self._clock = START_NS
        self._calls = 0

    def _tick(self) -> int:
        self._clock += STEP_NS
        return self._clock

    def run(self, conversation_id: str | None, turns: Sequence[Turn]) -> None:
        """One agent invocation: a chat span per turn and an execute_tool span per call."""
        common: dict[str, Any] = {"gen_ai.agent.id": self.agent_id}
        if conversation_id is not None:
            common["gen_ai.conversation.id"] = conversation_id
        root = self._tracer.start_span(
            f"invoke_agent {self.agent_id}",
            start_time=self._tick(),
            attributes={**common, "gen_ai.operation.name": "invoke_agent"},
        )
        root_context = trace.set_span_in_context(root)
        for turn in turns:
            chat = self._tracer.start_span(
                f"{self.operation} model-x",
                context=root_context,
                kind=SpanKind.CLIENT,
                start_time=self._tick(),
                attributes={
                    **common,
                    "gen_ai.operation.name": self.operation,
                    "gen_ai.request.model": "model-x",
                    "gen_ai.response.finish_reasons": ["tool_calls"] if turn else ["stop"],
                },
            )
            if self.style == "sibling":
                chat.end(end_time=self._tick())
                parent = root_context
            else:
                parent = trace.set_span_in_context(chat)
            for tool in turn:
                self._tool(tool, parent, common)
            if self.style == "child":
                chat.end(end_time=self._tick())
        root.end(end_time=self._tick())

    def _tool(self, tool: Tool, parent: Any, common: dict[str, Any]) -> None:
        self._calls += 1
        attributes = {
            **({} if self.strict else common),
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.call.id": f"call_{self._calls}",
            "gen_ai.tool.type": "function",
        }
        if tool.recorded_arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = tool.recorded_arguments
        elif self.record_content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(tool.arguments)
        span = self._tracer.start_span(
            f"execute_tool {tool.name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            start_time=self._tick(),
            attributes=attributes,
        )
        if tool.error is not None:
            span.set_attribute("error.type", "ToolError")
            span.set_status(Status(StatusCode.ERROR, tool.error))
        elif self.record_content:
            span.set_attribute("gen_ai.tool.call.result", json.dumps(tool.result))
        span.end(end_time=self._tick())

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


def export_records(
    spans: Sequence[ReadableSpan],
    encoding: str = "otlp_proto",
    *,
    batch: int = 3,
    shuffle: int | None = None,
) -> list[bytes]:
    """Exporter record values: `batch` spans per request, in span end order, or shuffled
    (spans of a batch and the batches themselves) with the seed `shuffle`."""
    ordered = list(spans)
    if shuffle is not None:
        random.Random(shuffle).shuffle(ordered)
    batches = [ordered[i : i + batch] for i in range(0, len(ordered), batch)]
    return [encode_request(chunk, encoding) for chunk in batches]


def encode_request(spans: Sequence[ReadableSpan], encoding: str = "otlp_proto") -> bytes:
    request = encode_spans(spans)
    if encoding == "otlp_proto":
        return bytes(request.SerializeToString())
    return json.dumps(otlp_json(request)).encode()


def otlp_json(request: Any) -> dict[str, Any]:
    """OTLP/JSON of a request as the Collector writes it: protobuf's JSON mapping
    (lowerCamelCase, 64-bit integers as strings), enums as integers, ids in hex."""
    document: dict[str, Any] = MessageToDict(request, use_integers_for_enums=True)
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return document
