from urllib.parse import urlsplit

import pytest
import time_machine
from django.core.files.base import ContentFile
from django.urls import reverse
from django.utils import timezone

from datasets.models import Document
from runs import services
from runs.engine import case as engine
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_and_document(make_dataset, agent, alice, no_llm, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    dataset = make_dataset(1, agent=agent)
    document = Document(team=agent.team, dataset=dataset, original_name="Refund policy.pdf", file_type="pdf")
    document.file.save("x.pdf", ContentFile(b"%PDF-1.4 policy"), save=True)
    run = services.run_start(agent=agent, dataset=dataset, user=alice)
    return run, document


def _path(url: str) -> str:
    return urlsplit(url).path


def test_a_signed_link_downloads_the_document_without_a_login(client, run_and_document):
    run, document = run_and_document
    url = engine.document_url(run, document.pk)
    assert url.startswith("http://")
    response = client.get(_path(url))
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"%PDF-1.4 policy"
    assert response["Content-Disposition"].startswith("attachment")
    assert 'filename="Refund policy.pdf"' in response["Content-Disposition"]
    assert response["X-Content-Type-Options"] == "nosniff"


def test_a_signed_link_is_served_as_hardened_as_every_other_document_download(client, run_and_document):
    # The same download as the dataset's and the playground's (datasets.documents.download_response):
    # nothing in a file an agent fetches can act on Evalsite's origin.
    run, document = run_and_document
    response = client.get(_path(engine.document_url(run, document.pk)))

    assert response["Content-Security-Policy"] == "sandbox; frame-ancestors 'self'"
    assert response["Cross-Origin-Resource-Policy"] == "same-origin"
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
    assert response["Content-Type"] == "application/pdf"


def test_a_tampered_link_is_refused(client, run_and_document):
    run, document = run_and_document
    path = _path(engine.document_url(run, document.pk))
    response = client.get(path[:-3] + "xyz/")
    assert response.status_code == 403


def test_a_link_works_until_its_time_to_live_and_is_refused_after(client, run_and_document, settings):
    run, document = run_and_document
    ttl = settings.EVALSITE_DOCUMENT_URL_TTL
    # A whole second: signed links carry their time in seconds.
    with time_machine.travel(timezone.now().replace(microsecond=0), tick=False) as traveller:
        path = _path(engine.document_url(run, document.pk))

        traveller.shift(ttl)
        assert client.get(path).status_code == 200  # at the limit: still valid

        traveller.shift(1)
        response = client.get(path)

    assert response.status_code == 410
    assert response.content == b"This document link has expired."


def test_a_link_for_another_teams_document_is_404(client, run_and_document):
    run, _ = run_and_document
    stranger = AgentFactory()
    foreign = Document.objects.create(team=stranger.team, original_name="secret.pdf", file_type="pdf")
    assert client.get(_path(engine.document_url(run, foreign.pk))).status_code == 404


def test_a_link_under_another_agent_is_404(client, run_and_document):
    run, document = run_and_document
    path = _path(engine.document_url(run, document.pk))
    other = path.replace(f"/agents/{run.agent_id}/", f"/agents/{run.agent_id + 1000}/")
    assert client.get(other).status_code == 404


def test_it_only_accepts_get(client, run_and_document):
    run, document = run_and_document
    assert client.post(_path(engine.document_url(run, document.pk))).status_code == 405


def test_the_url_name_is_runs_document_signed(run_and_document):
    run, _ = run_and_document
    assert reverse("runs:document_signed", kwargs={"agent_id": run.agent_id, "token": "t"}).endswith("/documents/t/")
