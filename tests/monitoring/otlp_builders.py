"""OTLP ExportTraceServiceRequests built with opentelemetry-proto's own classes, for the tests
that need exact bodies (error cases, merging, query counts); the real clients' tests send what the
SDK's exporter sends."""

from __future__ import annotations

import secrets
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

BASE_NANOS = 1_765_100_000_000_000_000


def trace_id() -> str:
    return secrets.token_hex(16)


def any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, list):
        result = AnyValue()
        result.array_value.values.extend(any_value(item) for item in value)
        return result
    return AnyValue(string_value=str(value))


def key_values(attributes: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in attributes.items()]


def span(
    trace: str,
    *,
    name: str = "chat fake-agent",
    span_id: str | None = None,
    parent: str = "",
    attributes: dict[str, Any] | None = None,
    start_ms: int = 0,
    duration_ms: int = 100,
    error: str | None = None,
) -> Span:
    result = Span(
        trace_id=bytes.fromhex(trace),
        span_id=bytes.fromhex(span_id or secrets.token_hex(8)),
        parent_span_id=bytes.fromhex(parent) if parent else b"",
        name=name,
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=BASE_NANOS + start_ms * 1_000_000,
        end_time_unix_nano=BASE_NANOS + (start_ms + duration_ms) * 1_000_000,
    )
    result.attributes.extend(key_values(attributes or {}))
    if error is not None:
        result.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=error))
    return result


def request(spans: list[Span], *, service: str = "support-bot", resource: dict[str, Any] | None = None):
    message = ExportTraceServiceRequest()
    resource_spans = message.resource_spans.add()
    resource_spans.resource.attributes.extend(key_values({"service.name": service, **(resource or {})}))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "tests"
    scope_spans.spans.extend(spans)
    return message


def chat_attributes(question: str, answer: str, *, input_tokens: int = 12, output_tokens: int = 5) -> dict:
    import json

    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "fake-agent",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
        ),
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": output_tokens,
    }
