"""A team's ingestion key, as a sender presents it: `Authorization: Bearer evi_…` (what
OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20evi_… makes the SDK's exporter send) or
`x-evalsite-key: evi_…`."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest
from django.utils import timezone

from monitoring.models import IngestionKey

HEADER = "x-evalsite-key"
LAST_USED_EVERY = timedelta(minutes=1)


def raw_key_of(request: HttpRequest) -> str:
    """The key the request carries, or "" (the scheme's case as RFC 9110 has it: any)."""
    authorization = request.headers.get("Authorization", "")
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get(HEADER, "").strip()


def ingestion_key_authenticate(raw: str) -> IngestionKey | None:
    """The active key `raw` is, with its team; None for anything else. Marks it used at most once
    a minute, so a busy exporter costs no write per request."""
    if not raw.startswith(IngestionKey.PREFIX) or len(raw) > 200:
        return None  # not one of ours: skip the database
    key = (
        IngestionKey.objects.select_related("team")
        .filter(key_hash=IngestionKey.hash(raw), revoked_at__isnull=True)
        .first()
    )
    if key is None:
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_EVERY:
        IngestionKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key
