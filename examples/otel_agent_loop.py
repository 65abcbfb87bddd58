"""A small agent loop instrumented with the OpenTelemetry SDK (no model), whose GenAI
spans go through `loopwatch otel-bridge`.

Two agents work on an in-memory file: one keeps retrying an edit whose old text is not in
the file and re-reads the same lines (a loop), the other reads, edits and runs the tests.
Their spans carry the GenAI attributes (`chat` and `execute_tool` spans, tool name, call
id, arguments and result, `error.type`, conversation and agent ids). They go to Kafka
exactly as the Collector's Kafka exporter writes them (one `ExportTraceServiceRequest` per
batch); the example then prints the warnings `loop-warnings` gets for its sessions.

    pip install 'loopwatch[otel]'
    loopwatch worker &  loopwatch otel-bridge &
    python examples/otel_agent_loop.py --bootstrap 127.0.0.1:9092

Exit code 0 when the looping agent was warned and the other was not. In production the
SDK exports OTLP to a Collector (ops/otel/collector.yaml) instead of `KafkaSpanExporter`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

# -- the tools the agents call (an in-memory workspace) ---------------------------------

FILES = {"app.py": "def total(xs):\n    return sum(x for x in xs)\n" * 20}


class ToolError(Exception):
    pass


def read_file(path: str, offset: int = 0, limit: int = 5) -> str:
    lines = FILES[path].splitlines()
    return "\n".join(lines[offset : offset + limit])


def edit_file(path: str, old: str, new: str) -> str:
    if old not in FILES[path]:
        raise ToolError(f"old text not found in {path}")
    FILES[path] = FILES[path].replace(old, new, 1)
    return "edited"


def bash(command: str) -> str:
    return "3 passed" if command == "pytest" else ""


TOOLS: dict[str, Callable[..., str]] = {
    "read_file": read_file,
    "edit_file": edit_file,
    "bash": bash,
}

# -- the agents' "models": scripted turns, each a list of (tool, arguments) --------------

Turn = list[tuple[str, dict[str, Any]]]
LOOPING: list[Turn] = [
    [("read_file", {"path": "app.py", "offset": 0})],
    [("edit_file", {"path": "app.py", "old": "sum(xs)", "new": "sum(xs or [])"})],
    [("edit_file", {"path": "app.py", "old": "sum(xs)", "new": "sum(xs or [])"})],
    [("read_file", {"path": "app.py", "offset": 10})],
    [("read_file", {"path": "app.py", "offset": 0})],
    [("read_file", {"path": "app.py", "offset": 0})],
    [("read_file", {"path": "app.py", "offset": 0})],
]
CLEAN: list[Turn] = [
    [("read_file", {"path": "app.py", "offset": 0}), ("bash", {"command": "ls"})],
    [("edit_file", {"path": "app.py", "old": "sum(x for x in xs)", "new": "sum(xs)"})],
    [("bash", {"command": "pytest"})],
    [],  # the final answer
]


def run_agent(
    tracer: trace.Tracer, conversation_id: str, agent_id: str, turns: Sequence[Turn]
) -> None:
    """One agent invocation: a `chat` span per model turn, an `execute_tool` span per call
    (siblings under `invoke_agent`, as most agent frameworks make them)."""
    ids = {"gen_ai.conversation.id": conversation_id, "gen_ai.agent.id": agent_id}
    with tracer.start_as_current_span(
        f"invoke_agent {agent_id}", attributes={**ids, "gen_ai.operation.name": "invoke_agent"}
    ):
        for number, turn in enumerate(turns):
            with tracer.start_as_current_span(
                "chat scripted-model",
                kind=SpanKind.CLIENT,
                attributes={
                    **ids,
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "scripted-model",
                    "gen_ai.response.finish_reasons": ["tool_calls"] if turn else ["stop"],
                },
            ):
                pass  # the model call would be here
            for index, (name, arguments) in enumerate(turn):
                call_tool(tracer, ids, f"call_{number}_{index}", name, arguments)


def call_tool(
    tracer: trace.Tracer, ids: dict[str, str], call_id: str, name: str, arguments: dict[str, Any]
) -> None:
    with tracer.start_as_current_span(
        f"execute_tool {name}",
        kind=SpanKind.INTERNAL,
        record_exception=False,
        set_status_on_exception=False,
        attributes={
            **ids,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            # opt-in content: without it loop detection degrades (docs/contract.md §10.6)
            "gen_ai.tool.call.arguments": json.dumps(arguments),
        },
    ) as span:
        try:
            result = TOOLS[name](**arguments)
        except ToolError as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
        else:
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))


# -- spans to Kafka, as the Collector's Kafka exporter writes them -----------------------


def encode_request(spans: Sequence[ReadableSpan], encoding: str) -> bytes:
    request = encode_spans(spans)
    if encoding == "otlp_proto":
        return bytes(request.SerializeToString())
    # OTLP/JSON: protobuf's JSON mapping with enums as integers and ids in hex
    document = MessageToDict(request, use_integers_for_enums=True)
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


class KafkaSpanExporter(SpanExporter):
    """Each batch of finished spans → one record on `topic` (no key, like the exporter).

    Fail-open, as an exporter must be: without a broker the spans are dropped (and the
    export reports a failure); the agents run all the same."""

    def __init__(self, bootstrap: str, topic: str, encoding: str = "otlp_proto") -> None:
        self._topic, self._encoding = topic, encoding
        self._loop = asyncio.new_event_loop()  # driven only from the exporting thread
        self._producer = self._loop.run_until_complete(self._start(bootstrap))

    @staticmethod
    async def _start(bootstrap: str) -> AIOKafkaProducer | None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        try:
            await producer.start()
        except KafkaError as exc:
            print(f"no Kafka at {bootstrap} ({type(exc).__name__}): spans are dropped")
            await producer.stop()
            return None
        return producer

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._producer is None:
            return SpanExportResult.FAILURE
        value = encode_request(spans, self._encoding)
        try:
            self._loop.run_until_complete(self._producer.send_and_wait(self._topic, value))
        except KafkaError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        if self._producer is not None:
            self._loop.run_until_complete(self._producer.stop())
        self._loop.close()


async def read_warnings(
    bootstrap: str, topic: str, sessions: set[str], wait: float, until: Callable[[list], bool]
) -> list[dict[str, Any]]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    try:
        await consumer.start()
    except KafkaError as exc:
        print(f"cannot read {topic} ({type(exc).__name__})", file=sys.stderr)
        await consumer.stop()
        return []
    found: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not until(found):
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                for record in batch:
                    verdict = json.loads(record.value)
                    if verdict["session_id"] in sessions:
                        found.append(verdict)
                        print(
                            f"{verdict['session_id']} seq {verdict['seq']}: "
                            f"[{verdict['warning']['rule']}] {verdict['warning']['message']}"
                        )
    finally:
        await consumer.stop()
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="otlp_spans", help="the bridge's LOOPWATCH_OTEL_TOPIC")
    parser.add_argument("--encoding", default="otlp_proto", choices=("otlp_proto", "otlp_json"))
    parser.add_argument("--warnings-topic", default="loop-warnings")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for warnings")
    args = parser.parse_args(argv)

    provider = TracerProvider(resource=Resource.create({"service.name": "example-agents"}))
    exporter = KafkaSpanExporter(args.bootstrap, args.topic, args.encoding)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=500))
    tracer = provider.get_tracer("loopwatch.examples.otel_agent_loop")
    run_id = uuid.uuid4().hex[:8]
    looping, clean = f"example-looping-{run_id}", f"example-clean-{run_id}"
    run_agent(tracer, looping, "looping-coder", LOOPING)
    run_agent(tracer, clean, "careful-coder", CLEAN)
    provider.shutdown()  # exports what is left
    print(f"spans of {looping} and {clean} sent to {args.topic}; waiting for warnings")

    warnings = asyncio.run(
        read_warnings(
            args.bootstrap,
            args.warnings_topic,
            {looping, clean},
            args.wait,
            until=lambda found: len({w["warning"]["rule"] for w in found}) >= 2,
        )
    )
    warned = {w["session_id"] for w in warnings}
    if warned == {looping}:
        print("the looping agent was warned, the careful one was not")
        return 0
    print(f"unexpected: warned sessions {sorted(warned)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
