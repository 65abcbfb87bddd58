"""One record of the Collector's Kafka exporter → plain spans.

The exporter writes one `ExportTraceServiceRequest` per record: protobuf (`otlp_proto`,
the default) or OTLP/JSON (`otlp_json`: lowerCamelCase names, trace and span ids as hex,
enums as integers, 64-bit integers as strings or numbers). The record key is empty, or
the trace id in hex with `partition_traces_by_id`; headers carry only client metadata
(`include_metadata_keys`). Neither is needed here: every span says its own trace.

Only the attributes the bridge reads are kept (`gen_ai.*`, `error.type`); a record that
is not a well-formed request raises `SpanDecodeError` (its record goes to the DLQ).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Encoding = Literal["otlp_proto", "otlp_json"]
ENCODINGS: tuple[Encoding, ...] = ("otlp_proto", "otlp_json")

STATUS_ERROR = 2
"""`Status.StatusCode.STATUS_CODE_ERROR` (OTLP trace.proto)."""

_KEPT_PREFIX = "gen_ai."
_KEPT_KEYS = frozenset({"error.type"})
_HEX = re.compile(r"[0-9a-fA-F]*")


class SpanDecodeError(ValueError):
    """The record is not an OTLP trace request in the configured encoding."""


@dataclass(frozen=True, slots=True)
class Span:
    """One span, reduced to what the bridge reads. Ids are lowercase hex."""

    trace_id: str
    span_id: str
    parent_span_id: str
    """Empty for a root span."""
    name: str
    start_ns: int
    end_ns: int
    status_code: int
    status_message: str
    attributes: Mapping[str, Any]
    """`gen_ai.*` and `error.type` only; OTLP AnyValues as plain JSON-able values."""


def decode_spans(value: bytes | None, encoding: Encoding) -> list[Span]:
    """Every span of one exporter record."""
    if not value:
        raise SpanDecodeError("record has no value")
    if encoding == "otlp_json":
        return list(_json_spans(value))
    return list(_proto_spans(value))


# -- otlp_proto --------------------------------------------------------------------------


def _proto_spans(value: bytes) -> Iterator[Span]:
    from google.protobuf.message import DecodeError  # noqa: PLC0415  (the `otel` extra)
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415
        ExportTraceServiceRequest,
    )

    try:
        request = ExportTraceServiceRequest.FromString(value)
    except (DecodeError, ValueError) as exc:
        raise SpanDecodeError(f"not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    if not request.resource_spans and value:
        # protobuf reads arbitrary bytes made only of unknown fields as an empty message
        raise SpanDecodeError("not an OTLP protobuf ExportTraceServiceRequest: no resource_spans")
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield Span(
                    trace_id=_id_hex(span.trace_id, 16, "trace_id"),
                    span_id=_id_hex(span.span_id, 8, "span_id"),
                    parent_span_id=_id_hex(span.parent_span_id, 8, "parent_span_id", empty=True),
                    name=span.name,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    status_code=int(span.status.code),
                    status_message=span.status.message,
                    attributes={
                        kv.key: _proto_value(kv.value) for kv in span.attributes if _kept(kv.key)
                    },
                )


def _id_hex(raw: bytes, size: int, field: str, *, empty: bool = False) -> str:
    if empty and not raw:
        return ""
    if len(raw) != size or not any(raw):
        raise SpanDecodeError(f"span {field} must be {size} bytes, not all zero")
    return raw.hex()


def _proto_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_proto_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, kind)


# -- otlp_json ---------------------------------------------------------------------------


def _json_spans(value: bytes) -> Iterator[Span]:
    try:
        document = json.loads(value)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SpanDecodeError(f"not OTLP/JSON: {exc}") from None
    resource_spans = _list(document, "resourceSpans", "request")
    if not resource_spans:
        raise SpanDecodeError("not an OTLP/JSON trace request: no resourceSpans")
    for resource in resource_spans:
        for scope in _list(resource, "scopeSpans", "resourceSpans[]"):
            for span in _list(scope, "spans", "scopeSpans[]"):
                if not isinstance(span, dict):
                    raise SpanDecodeError("a span is not a JSON object")
                status = span.get("status") or {}
                if not isinstance(status, dict):
                    raise SpanDecodeError("span status is not a JSON object")
                yield Span(
                    trace_id=_json_id(span.get("traceId"), 16, "traceId"),
                    span_id=_json_id(span.get("spanId"), 8, "spanId"),
                    parent_span_id=_json_id(
                        span.get("parentSpanId"), 8, "parentSpanId", empty=True
                    ),
                    name=_string(span.get("name", ""), "name"),
                    start_ns=_json_int(span.get("startTimeUnixNano", 0), "startTimeUnixNano"),
                    end_ns=_json_int(span.get("endTimeUnixNano", 0), "endTimeUnixNano"),
                    status_code=_json_int(status.get("code", 0), "status.code"),
                    status_message=_string(status.get("message", ""), "status.message"),
                    attributes={
                        key: _json_value(item.get("value") or {})
                        for item in _list(span, "attributes", "span")
                        if isinstance(item, dict)
                        and _kept(key := _string(item.get("key", ""), "attribute key"))
                    },
                )


def _list(document: Any, field: str, where: str) -> list[Any]:
    if not isinstance(document, dict):
        raise SpanDecodeError(f"{where} is not a JSON object")
    items = document.get(field, [])
    if not isinstance(items, list):
        raise SpanDecodeError(f"{where}.{field} is not a list")
    return items


def _json_id(raw: Any, size: int, field: str, *, empty: bool = False) -> str:
    if empty and raw in (None, ""):
        return ""
    if not isinstance(raw, str) or len(raw) != 2 * size or not _HEX.fullmatch(raw):
        raise SpanDecodeError(f"span {field} must be {2 * size} hex digits")
    if not raw.strip("0"):
        raise SpanDecodeError(f"span {field} is all zero")
    return raw.lower()


def _json_int(raw: Any, field: str) -> int:
    # proto3 JSON: 64-bit integers as decimal strings; numbers are accepted too
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and re.fullmatch(r"-?[0-9]+", raw):
        return int(raw)
    raise SpanDecodeError(f"span {field} must be an integer")


def _string(raw: Any, field: str) -> str:
    if not isinstance(raw, str):
        raise SpanDecodeError(f"span {field} must be a string")
    return raw


def _json_value(value: Any) -> Any:
    if not isinstance(value, dict):
        raise SpanDecodeError("an attribute value is not an OTLP AnyValue object")
    if "stringValue" in value:
        return _string(value["stringValue"], "stringValue")
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return _json_int(value["intValue"], "intValue")
    if "doubleValue" in value:
        try:
            return float(value["doubleValue"])  # "NaN", "Infinity" are proto3 JSON too
        except (TypeError, ValueError):
            raise SpanDecodeError("span doubleValue must be a number") from None
    if "arrayValue" in value:
        return [_json_value(item) for item in _list(value["arrayValue"], "values", "arrayValue")]
    if "kvlistValue" in value:
        return {
            _string(kv.get("key", ""), "key"): _json_value(kv.get("value") or {})
            for kv in _list(value["kvlistValue"], "values", "kvlistValue")
            if isinstance(kv, dict)
        }
    if "bytesValue" in value:
        return _string(value["bytesValue"], "bytesValue")
    return None


def _kept(key: str) -> bool:
    return key.startswith(_KEPT_PREFIX) or key in _KEPT_KEYS
