"""Plain JSON ingestion, POST /api/traces (for teams without OpenTelemetry), and end-user feedback,
POST /api/feedback, authenticated by a team's ingestion key (`Authorization: Bearer evi_…` or
`x-evalsite-key: evi_…`), not a user's API token: an app in production sends them.

A trace is stored exactly as an OTLP one is (monitoring/ingest/plain.py): masked unless its agent
turned masking off, grouped into its session's conversation, mapped to an agent by its service or
`agent`. Feedback may come before its trace and is linked when the trace comes."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Literal

from django.db import DatabaseError
from django.http import HttpRequest
from ninja import Field, Router, Schema, Status
from ninja.security import APIKeyHeader, HttpBearer

from evalsite.api_errors import DetailOut, ValidationErrorOut, field_invalid
from evalsite.schemas import StrictSchema
from monitoring.ingest import services
from monitoring.ingest.keys import HEADER, ingestion_key_authenticate
from monitoring.ingest.otlp import hex_id_or_none
from monitoring.ingest.plain import spans_from_plain
from monitoring.models import Feedback, IngestionKey

logger = logging.getLogger(__name__)
router = Router(tags=["monitoring ingestion"])
UNAVAILABLE = "The data could not be stored just now; send it again."


class IngestionBearer(HttpBearer):
    """`Authorization: Bearer evi_…`: a team's ingestion key (Settings → Monitoring)."""

    def authenticate(self, request: HttpRequest, token: str) -> IngestionKey | None:
        return ingestion_key_authenticate(token)


class IngestionHeader(APIKeyHeader):
    """`x-evalsite-key: evi_…`: the same key, for clients that cannot set Authorization."""

    param_name = HEADER

    def authenticate(self, request: HttpRequest, key: str | None) -> IngestionKey | None:
        return ingestion_key_authenticate(key or "")


INGESTION_AUTH = [IngestionBearer(), IngestionHeader()]


class IngestionRequest(HttpRequest):
    """The request an ingestion view sees: INGESTION_AUTH has set `auth` to the key it presented
    (evalsite.http.ApiRequest is the same for a user's API token)."""

    auth: IngestionKey


class ToolCallIn(StrictSchema):
    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] | list[Any] | str = Field(default_factory=dict)
    result: Any = Field(None, description="What the tool returned (stored as text; JSON for other values)")
    id: str = Field("", max_length=200)


class MessageIn(StrictSchema):
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str = Field("", max_length=1_000_000)
    tool_calls: list[ToolCallIn] = Field(default_factory=list, max_length=100)
    tool_call_id: str = Field("", max_length=200)


class DocumentIn(StrictSchema):
    id: str = Field("", max_length=500)
    content: str = Field(max_length=1_000_000)
    score: float | None = None


# The defaults below are given as `default=`: mypy takes only that keyword as a default, and
# TraceIn's default_factory needs TokensIn() and TimingsIn() to type-check without arguments.
class TokensIn(StrictSchema):
    input: int = Field(default=0, ge=0, le=2**31 - 1)
    output: int = Field(default=0, ge=0, le=2**31 - 1)


class TimingsIn(StrictSchema):
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_ms: int | None = Field(default=None, ge=0, le=7 * 24 * 3600 * 1000)


class TraceIn(StrictSchema):
    """One request to the agent. Only `messages` or `answer` is needed; the rest is optional.
    A field not listed here is refused (a 422 naming it): put your own in `attributes`."""

    trace_id: str = Field("", description="32 hex digits (an OpenTelemetry trace id); made up when empty")
    session_id: str = Field("", max_length=200, description="Groups traces into a conversation")
    service: str = Field("", max_length=200, description="Mapped to an agent in Settings → Monitoring")
    agent: str = Field("", max_length=120, description="An agent's id or name; wins over the service's mapping")
    name: str = Field("", max_length=300)
    user_id: str = Field("", max_length=200)
    model: str = Field("", max_length=200)
    messages: list[MessageIn] = Field(
        default_factory=list, max_length=1000, description="The conversation up to the answer"
    )
    answer: str = Field("", max_length=1_000_000)
    tool_calls: list[ToolCallIn] = Field(default_factory=list, max_length=200)
    documents: list[DocumentIn] = Field(default_factory=list, max_length=200, description="Retrieved documents")
    tokens: TokensIn = Field(default_factory=TokensIn)
    cost: float | None = Field(None, ge=0, le=1e9, description="USD")
    timings: TimingsIn = Field(default_factory=TimingsIn)
    status: Literal["ok", "error"] = "ok"
    error: str = Field("", max_length=10_000)
    tags: list[str] = Field(default_factory=list, max_length=50)
    attributes: dict[str, Any] = Field(default_factory=dict, description="Anything else: kept as sent")


class TraceAcceptedOut(Schema):
    id: int
    trace_id: str
    spans_stored: int


class FeedbackIn(StrictSchema):
    """Exactly one of `thumbs` and `score`."""

    trace_id: str = Field(description="The trace's id, 32 hex digits (it may not have arrived yet)")
    thumbs: Literal["up", "down"] | None = None
    score: float | None = Field(None, ge=0, le=10, description="0-10")
    comment: str = Field("", max_length=10_000)
    user_id: str = Field("", max_length=200)


class FeedbackOut(Schema):
    id: int
    trace_id: str = Field(alias="otel_trace_id")
    kind: str
    value: float
    comment: str
    linked: bool

    @staticmethod
    def resolve_linked(feedback: Feedback) -> bool:
        return feedback.trace_id is not None


def _trace_id(value: str, *, required: bool) -> str:
    if not value and not required:
        return ""
    found = hex_id_or_none(value, 32)
    if found is None or not found.strip("0"):
        raise field_invalid("trace_id", "Give the trace id as 32 hex digits, not all zero.")
    return found


@router.post(
    "/traces",
    auth=INGESTION_AUTH,
    response={200: TraceAcceptedOut, 422: ValidationErrorOut, 503: DetailOut},
    url_name="monitoring_trace_ingest",
    summary="Send a trace as plain JSON (for apps without OpenTelemetry), with an ingestion key",
)
def trace_ingest(request: IngestionRequest, payload: TraceIn) -> Any:
    """Stored as an OTLP trace is: masked, grouped by session, mapped to an agent. Sending the same
    trace_id again adds nothing, so a retry is safe."""
    data = payload.model_dump()
    data["trace_id"] = _trace_id(payload.trace_id, required=False)
    if not payload.messages and not payload.answer:
        raise field_invalid("messages", "Send the conversation (messages), the answer, or both.")
    trace_id, spans = spans_from_plain(data)
    try:
        result = services.traces_ingest(team=request.auth.team, spans=spans)
    except DatabaseError:
        logger.exception("A plain trace could not be stored")
        return Status(503, {"detail": UNAVAILABLE})
    return {"id": result.trace_ids[0], "trace_id": trace_id, "spans_stored": result.spans_stored}


@router.post(
    "/feedback",
    auth=INGESTION_AUTH,
    response={201: FeedbackOut, 422: ValidationErrorOut, 503: DetailOut},
    url_name="monitoring_feedback_ingest",
    summary="Send an end user's feedback on a trace (thumbs up/down or a 0-10 score), with an ingestion key",
)
def feedback_ingest(request: IngestionRequest, payload: FeedbackIn) -> Any:
    trace_id = _trace_id(payload.trace_id, required=True)
    if (payload.thumbs is None) == (payload.score is None):
        raise field_invalid("thumbs", "Send either thumbs (up or down) or a score from 0 to 10.")
    if payload.score is not None:
        kind, value = Feedback.Kind.SCORE, float(payload.score)
    else:
        kind, value = Feedback.Kind.THUMBS, 1.0 if payload.thumbs == "up" else 0.0
    try:
        feedback = services.feedback_record(
            team=request.auth.team,
            otel_trace_id=trace_id,
            kind=kind,
            value=value,
            comment=payload.comment,
            user_id=payload.user_id,
        )
    except DatabaseError:
        logger.exception("Feedback could not be stored")
        return Status(503, {"detail": UNAVAILABLE})
    return Status(201, feedback)
