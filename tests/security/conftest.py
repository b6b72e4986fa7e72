"""Fixtures of the security suite: the permission matrix's objects (one of each kind in
alice's team, tests/test_permissions.py), with a real file in storage behind the document."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.urls import resolve
from django.utils import timezone

from datasets.models import Document
from evalsite.models import WorkerHeartbeat
from playground import services as playground_services
from playground.models import Exchange
from runs.engine import case as engine
from runs.models import Run
from tests.datasets.files import pdf_bytes
from tests.test_permissions import url_objects  # noqa: F401 - reused, not copied


@pytest.fixture
def media_root(settings, tmp_path: Path) -> Path:
    root = tmp_path / "media"
    root.mkdir()
    settings.MEDIA_ROOT = root
    return root


@pytest.fixture
def stored_objects(url_objects, media_root) -> dict[str, int | str]:  # noqa: F811
    """url_objects whose document is a real PDF in MEDIA_ROOT, plus a signed link to it for
    the public route HTTP agents use, so file views answer 200 and their headers can be read."""
    document = Document.objects.get(pk=url_objects["document_id"])
    data = pdf_bytes([["Question: How long is the refund window?", "Answer: 30 days."]])
    path = media_root / document.file.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    Document.objects.filter(pk=document.pk).update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    run = Run.objects.get(pk=url_objects["run_id"])
    signed = urlsplit(engine.document_url(run, document.pk)).path
    # A worker that beats, so /healthz answers 200 like the rest of the sweep (its 503: tests/evalsite).
    WorkerHeartbeat.objects.create(name="sweep-worker", started_at=timezone.now(), last_seen=timezone.now())
    exchange = Exchange.objects.get(pk=url_objects["exchange_id"])
    playground_link = urlsplit(playground_services.document_url(exchange, document.pk)).path
    return {
        **url_objects,
        "token": resolve(signed).kwargs["token"],
        "signed": resolve(playground_link).kwargs["signed"],
    }
