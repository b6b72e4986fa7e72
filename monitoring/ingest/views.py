"""POST /v1/traces: the OTLP/HTTP trace receiver (opentelemetry.io/docs/specs/otlp/#otlphttp).

The sender authenticates with a team's ingestion key (monitoring/ingest/keys.py). The body is
read, capped and parsed by monitoring/ingest/otlp.py and stored by monitoring/ingest/services.py.
Every refusal is an OTLP answer with a google.rpc.Status body: 401 for a missing, unknown or
revoked key, 400 for a body that is no ExportTraceServiceRequest, 413 past the size limit (sent or
unpacked), 415 for another content type or encoding; spans refused for their ids are counted in
the success answer's partial_success. A database that fails answers 503, which the SDK's exporter
retries: nothing is dropped silently.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from monitoring.ingest import otlp, services
from monitoring.ingest.keys import ingestion_key_authenticate, raw_key_of

logger = logging.getLogger(__name__)


def _answer(content_type: str, status: int, message: str) -> HttpResponse:
    body, media = otlp.error_body(content_type, status, message)
    response = HttpResponse(body, status=status, content_type=media)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="evalsite-ingest"'
    if status == 503:
        response["Retry-After"] = "5"
    return response


def _content_length(request: HttpRequest) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None


@csrf_exempt
@require_POST
def traces_export(request: HttpRequest) -> HttpResponse:
    """Store the request's spans for the key's team; answer as OTLP says."""
    content_type = request.headers.get("Content-Type", "")
    key = ingestion_key_authenticate(raw_key_of(request))
    if key is None:
        message = "Send a team's active ingestion key as `Authorization: Bearer evi_…` (Settings → Monitoring)."
        return _answer(content_type, 401, message)
    try:
        body = otlp.read_body(
            request,
            content_length=_content_length(request),
            content_encoding=request.headers.get("Content-Encoding", ""),
            limit=settings.INGEST_MAX_BYTES,
        )
        decoded = otlp.spans_of(otlp.parse(body, content_type))
    except otlp.OtlpError as error:
        return _answer(content_type, error.status, error.message)
    try:
        services.traces_ingest(team=key.team, spans=decoded.spans)
    except DatabaseError:
        logger.exception("OTLP ingestion could not write %d spans", len(decoded.spans))
        return _answer(content_type, 503, "The spans could not be stored just now; send them again.")
    body, media = otlp.success_body(content_type, rejected=decoded.rejected, message="; ".join(decoded.errors))
    return HttpResponse(body, status=200, content_type=media)
