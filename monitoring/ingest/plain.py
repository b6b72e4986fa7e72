"""POST /api/traces, the plain JSON form of a trace for apps without OpenTelemetry, read into the
same spans OTLP brings (OpenInference attributes on a root span, one child span per tool call), so
one path stores both: merging, conversations, agents, masking and feedback work the same.

A trace sent again with the same trace_id adds nothing (its spans' ids come from the trace id):
a client's retry is safe. Its `attributes` are kept as sent on the root span and the trace.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from monitoring.ingest.otlp import DecodedSpan, clean
from monitoring.models import Span


def _span_id(trace_id: str, what: str) -> str:
    return hashlib.sha256(f"{trace_id}:{what}".encode()).hexdigest()[:16]


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _nanos(moment: datetime) -> int:
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, UTC)
    return max(0, (moment - EPOCH) // timedelta(microseconds=1) * 1000)  # exact: no float


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _times(timings: dict[str, Any]) -> tuple[int, int]:
    started: datetime | None = timings.get("started_at")
    ended: datetime | None = timings.get("ended_at")
    length = timedelta(milliseconds=timings.get("duration_ms") or 0)
    if started is None:
        if ended is None:
            ended = timezone.now()
        started = ended - length
    elif ended is None:
        ended = started + length
    return _nanos(started), max(_nanos(ended), _nanos(started))


def _message_attributes(prefix: str, message: dict[str, Any]) -> dict[str, Any]:
    found = {f"{prefix}.message.role": message["role"], f"{prefix}.message.content": message.get("content") or ""}
    for number, call in enumerate(message.get("tool_calls") or []):
        call_prefix = f"{prefix}.message.tool_calls.{number}.tool_call"
        found[f"{call_prefix}.id"] = call.get("id") or ""
        found[f"{call_prefix}.function.name"] = call["name"]
        found[f"{call_prefix}.function.arguments"] = _json_text(call.get("arguments") or {})
    if message.get("tool_call_id"):
        found[f"{prefix}.message.tool_call_id"] = message["tool_call_id"]
    return found


def _cleaned(value: Any) -> Any:
    """Text any database stores (no NUL, no lone surrogate), all the way down."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [_cleaned(item) for item in value]
    if isinstance(value, dict):
        return {clean(str(key)): _cleaned(item) for key, item in value.items()}
    if isinstance(value, float) and value != value:  # NaN: not JSON
        return None
    return value


def spans_from_plain(data: dict[str, Any]) -> tuple[str, list[DecodedSpan]]:
    """(the trace id, its spans) of a plain trace, validated by its schema (monitoring/api_ingest.py)."""
    data = _cleaned(data)
    trace_id = data.get("trace_id") or secrets.token_hex(16)
    start, end = _times(data.get("timings") or {})
    attributes: dict[str, Any] = dict(data.get("attributes") or {})
    attributes["openinference.span.kind"] = "LLM"
    for number, message in enumerate(data.get("messages") or []):
        attributes.update(_message_attributes(f"llm.input_messages.{number}", message))
    if data.get("answer"):
        attributes.update(
            _message_attributes("llm.output_messages.0", {"role": "assistant", "content": data["answer"]})
        )
    for number, document in enumerate(data.get("documents") or []):
        prefix = f"retrieval.documents.{number}.document"
        attributes.update({f"{prefix}.id": document.get("id") or "", f"{prefix}.content": document["content"]})
        if document.get("score") is not None:
            attributes[f"{prefix}.score"] = document["score"]
    tokens = data.get("tokens") or {}
    optional = {
        "llm.model_name": data.get("model"),
        "llm.token_count.prompt": tokens.get("input"),
        "llm.token_count.completion": tokens.get("output"),
        "llm.cost.total": data.get("cost"),
        "session.id": data.get("session_id"),
        "user.id": data.get("user_id"),
        "tag.tags": data.get("tags") or None,
        "evalsite.agent": data.get("agent"),
    }
    attributes.update({key: value for key, value in optional.items() if value not in (None, "")})
    root_id = _span_id(trace_id, "root")
    error = data.get("error") or ""
    root = Span(
        span_id=root_id,
        name=clean(data.get("name") or "trace")[:300],
        kind="server",
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        status_code="error" if data.get("status") == "error" or error else "",
        status_message=error,
        attributes=attributes,
        scope="evalsite.plain",
    )
    spans = [root] + [
        _tool_span(trace_id, root_id, number, call, start, end)
        for number, call in enumerate(data.get("tool_calls") or [])
    ]
    resource = {"service.name": data.get("service") or ""}
    service = data.get("service") or ""
    return trace_id, [
        DecodedSpan(trace_id=trace_id, span=span, resource=resource, service_name=service) for span in spans
    ]


def _tool_span(trace_id: str, parent: str, number: int, call: dict[str, Any], start: int, end: int) -> Span:
    attributes = {
        "openinference.span.kind": "TOOL",
        "tool.name": call["name"],
        "tool.parameters": _json_text(call.get("arguments") or {}),
    }
    if call.get("id"):
        attributes["tool_call.id"] = call["id"]
    if call.get("result") is not None:
        attributes["output.value"] = _json_text(call["result"])
    return Span(
        span_id=_span_id(trace_id, f"tool:{number}"),
        parent_span_id=parent,
        name=clean(f"tool {call['name']}")[:300],
        kind="internal",
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=attributes,
        scope="evalsite.plain",
    )
