"""OTLP/HTTP trace export, read and answered as the OTLP specification says
(opentelemetry.io/docs/specs/otlp/#otlphttp): the body is an ExportTraceServiceRequest, binary
protobuf (application/x-protobuf) or OTLP-JSON (application/json, ids as hex), optionally gzip;
the answer is an ExportTraceServiceResponse in the request's encoding, with partial_success for
rejected spans; an error is a google.rpc.Status in that encoding.

Parsing is opentelemetry-proto's (protobuf's own parser and json_format); this module only turns
the messages into unsaved `Span` rows and plain Python values that a database can store.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from monitoring.models import Span

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# Deeper AnyValue nesting is kept as a marker: no sender needs it, and it would cost every reader.
MAX_DEPTH = 32
MAX_NANOS = 2**63 - 1  # a BigIntegerField
KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
STATUS_CODES = {1: "ok", 2: "error"}
# google.rpc.Code, for the Status of an error answer.
RPC_CODES = {400: 3, 401: 16, 413: 8, 415: 3, 503: 14}


class OtlpError(Exception):
    """A request refused whole: the HTTP status and the message the sender reads."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class DecodedSpan:
    """One valid span of a request, with what its resource said."""

    trace_id: str
    span: Span
    resource: dict[str, Any]
    service_name: str


@dataclass
class Decoded:
    spans: list[DecodedSpan] = field(default_factory=list)
    rejected: int = 0
    errors: list[str] = field(default_factory=list)


# ---- the body -------------------------------------------------------------------------------


def media_type(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


def read_body(stream: Any, *, content_length: int | None, content_encoding: str, limit: int) -> bytes:
    """The request's body, gunzipped; 413 past `limit` bytes sent or unpacked (a gzip bomb stops
    at the limit, unpacked no further)."""
    if content_length is not None and content_length > limit:
        raise OtlpError(413, f"The body is {content_length} bytes, over the limit of {limit} bytes.")
    raw = stream.read(limit + 1)
    if len(raw) > limit:
        raise OtlpError(413, f"The body is over the limit of {limit} bytes.")
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding != "gzip":
        raise OtlpError(415, f"Content-Encoding {content_encoding!r} is not supported: send gzip or none.")
    return _gunzip(raw, limit)


def _gunzip(raw: bytes, limit: int) -> bytes:
    unpacker = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        body = unpacker.decompress(raw, limit + 1)
    except zlib.error as error:
        raise OtlpError(400, f"The body is not valid gzip: {error}.") from None
    if len(body) > limit or unpacker.unconsumed_tail:
        raise OtlpError(413, f"The body unpacks to over the limit of {limit} bytes.")
    if not unpacker.eof:
        raise OtlpError(400, "The gzip body is truncated.")
    return body


def parse(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    kind = media_type(content_type)
    message = ExportTraceServiceRequest()
    if kind == PROTOBUF:
        try:
            message.ParseFromString(body)
        except (DecodeError, RecursionError, ValueError) as error:
            raise OtlpError(400, f"The body is not a valid ExportTraceServiceRequest protobuf: {error}") from None
        return message
    if kind == JSON:
        try:
            document = json.loads(body)
            json_format.ParseDict(_hex_ids_as_base64(document), message, ignore_unknown_fields=True)
        except (ValueError, RecursionError, json_format.ParseError, TypeError, AttributeError) as error:
            raise OtlpError(400, f"The body is not a valid OTLP-JSON ExportTraceServiceRequest: {error}") from None
        return message
    raise OtlpError(415, f"Content-Type {content_type!r} is not supported: send {PROTOBUF} or {JSON}.")


def _hex_ids_as_base64(document: Any) -> Any:
    """OTLP-JSON sends trace and span ids as hex, where protobuf's JSON mapping reads base64."""
    if not isinstance(document, dict):
        raise ValueError("the top level is not an object")
    for resource_spans in _list(document, "resourceSpans", "resource_spans"):
        for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
            for span in _list(scope_spans, "spans"):
                _convert_ids(span)
                for link in _list(span, "links"):
                    _convert_ids(link)
    return document


def _list(parent: Any, *names: str) -> list:
    if not isinstance(parent, dict):
        return []
    for name in names:
        value = parent.get(name)
        if isinstance(value, list):
            return value
    return []


def _convert_ids(item: Any) -> None:
    if not isinstance(item, dict):
        return
    for name in ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id"):
        value = item.get(name)
        if isinstance(value, str):
            try:
                item[name] = base64.b64encode(bytes.fromhex(value)).decode()
            except ValueError:
                item[name] = ""  # not hex: the span is rejected for its id, not the whole request


# ---- the answer -----------------------------------------------------------------------------


def success_body(content_type: str, *, rejected: int, message: str) -> tuple[bytes, str]:
    response = ExportTraceServiceResponse()
    if rejected or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    if media_type(content_type) == JSON:
        return json_format.MessageToJson(response, indent=None).encode(), JSON
    return response.SerializeToString(), PROTOBUF


def error_body(content_type: str, status: int, message: str) -> tuple[bytes, str]:
    """A google.rpc.Status {code, message}: protobuf for a protobuf request, else JSON."""
    code = RPC_CODES.get(status, 2)
    if media_type(content_type) == PROTOBUF:
        text = message.encode()
        return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text, PROTOBUF
    return json.dumps({"code": code, "message": message}).encode(), JSON


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


# ---- spans ----------------------------------------------------------------------------------


def spans_of(message: ExportTraceServiceRequest) -> Decoded:
    decoded = Decoded()
    for resource_spans in message.resource_spans:
        resource = attributes_dict(resource_spans.resource.attributes)
        service_name = clip(resource.get("service.name"), 200)
        for scope_spans in resource_spans.scope_spans:
            scope = clip(scope_spans.scope.name, 200)
            for span in scope_spans.spans:
                problem = _id_problem(span.trace_id, span.span_id, span.parent_span_id)
                if problem:
                    decoded.rejected += 1
                    if len(decoded.errors) < 5:
                        decoded.errors.append(f"span {span.name[:60]!r}: {problem}")
                    continue
                decoded.spans.append(
                    DecodedSpan(
                        trace_id=span.trace_id.hex(),
                        span=_span_row(span, scope),
                        resource=resource,
                        service_name=service_name,
                    )
                )
    return decoded


def _id_problem(trace_id: bytes, span_id: bytes, parent_span_id: bytes) -> str:
    if len(trace_id) != 16 or not any(trace_id):
        return "trace_id must be 16 bytes (32 hex digits), not all zero"
    if len(span_id) != 8 or not any(span_id):
        return "span_id must be 8 bytes (16 hex digits), not all zero"
    if parent_span_id and len(parent_span_id) != 8:
        return "parent_span_id must be empty or 8 bytes (16 hex digits)"
    return ""


def _span_row(span: Any, scope: str) -> Span:
    start = min(span.start_time_unix_nano, MAX_NANOS)
    end = min(span.end_time_unix_nano, MAX_NANOS) or start
    return Span(
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex() if any(span.parent_span_id) else "",
        name=clip(span.name, 300),
        kind=KINDS.get(span.kind, ""),
        start_time_unix_nano=start,
        end_time_unix_nano=max(end, start),
        status_code=STATUS_CODES.get(span.status.code, ""),
        status_message=clean(span.status.message),
        attributes=attributes_dict(span.attributes),
        events=[
            {
                "name": clean(event.name),
                "time_unix_nano": min(event.time_unix_nano, MAX_NANOS),
                "attributes": attributes_dict(event.attributes),
            }
            for event in span.events
        ],
        links=[
            {
                "trace_id": link.trace_id.hex(),
                "span_id": link.span_id.hex(),
                "attributes": attributes_dict(link.attributes),
            }
            for link in span.links
        ],
        scope=scope,
    )


def attributes_dict(key_values: Any, depth: int = 0) -> dict[str, Any]:
    return {clean(item.key): any_value(item.value, depth + 1) for item in key_values}


def any_value(value: Any, depth: int = 0) -> Any:
    """An AnyValue as a JSON-safe Python value (no NUL, no lone surrogate, no NaN)."""
    if depth > MAX_DEPTH:
        return "[nested too deep]"
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return clean(value.string_value)
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else str(number)
    if kind == "array_value":
        return [any_value(item, depth + 1) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_dict(value.kvlist_value.values, depth)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return None


def clean(text: str) -> str:
    """Text any database stores: PostgreSQL refuses NUL, and UTF-8 has no lone surrogates."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def clip(value: Any, length: int) -> str:
    return clean(value if isinstance(value, str) else "" if value is None else str(value))[:length]


def nanos_to_datetime(nanos: int) -> datetime:
    seconds = min(max(nanos / 1e9, 0), 253_402_300_799)  # 9999-12-31
    return datetime.fromtimestamp(seconds, tz=UTC)


def hex_id_or_none(text: str, length: int) -> str | None:
    """A trace id given as text (plain JSON, feedback): lowercase hex of `length` digits."""
    text = text.strip().lower()
    if len(text) != length:
        return None
    try:
        binascii.unhexlify(text)
    except (binascii.Error, ValueError):
        return None
    return text
