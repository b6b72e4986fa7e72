"""Downloading a run's exports from the run page."""

import io
import json

import pytest
from django.urls import reverse
from openpyxl import load_workbook

from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db

EXPORTS = ["runs:export_json", "runs:export_csv", "runs:export_xlsx", "runs:export_html"]


@pytest.fixture
def run(agent):
    return build_run(agent=agent, dataset=DatasetFactory(agent=agent, name="Refund policy"), cases=[CaseSpec()])


def _url(run, name):
    return reverse(name, args=[run.agent_id, run.pk])


def test_the_run_page_links_every_export(client_alice, run):
    body = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk])).content.decode()
    for name in EXPORTS:
        assert f'href="{_url(run, name)}" download' in body


@pytest.mark.parametrize(
    "name, content_type, extension",
    [
        ("runs:export_json", "application/json", "json"),
        ("runs:export_csv", "text/csv; charset=utf-8", "csv"),
        ("runs:export_xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"),
        ("runs:export_html", "text/html; charset=utf-8", "html"),
    ],
)
def test_each_export_downloads_as_a_file(client_bob, run, name, content_type, extension):
    response = client_bob.get(_url(run, name))
    assert response.status_code == 200
    assert response["Content-Type"] == content_type
    assert response["Content-Disposition"] == f'attachment; filename="evalsite-run-{run.pk}-refund-policy.{extension}"'


def test_the_downloads_hold_the_run(client_alice, run):
    assert json.loads(client_alice.get(_url(run, "runs:export_json")).content)["run"]["id"] == run.pk
    assert client_alice.get(_url(run, "runs:export_csv")).content.decode().startswith('\ufeff"run_id"')
    workbook = load_workbook(io.BytesIO(client_alice.get(_url(run, "runs:export_xlsx")).content))
    assert workbook.sheetnames == ["Summary", "Results"]
    assert "Refund policy" in client_alice.get(_url(run, "runs:export_html")).content.decode()


@pytest.mark.parametrize("name", EXPORTS)
def test_exports_only_accept_get(client_alice, run, name):
    assert client_alice.post(_url(run, name)).status_code == 405


@pytest.mark.parametrize("name", EXPORTS)
def test_outsiders_get_404_and_anonymous_visitors_log_in(client_charlie, client, run, name):
    assert client_charlie.get(_url(run, name)).status_code == 404
    assert client.get(_url(run, name))["Location"].startswith(reverse("accounts:login"))


@pytest.mark.parametrize("name", EXPORTS)
def test_htmx_requests_get_the_same_file(client_alice, run, name):
    # Downloads are plain links; an htmx request (a boosted link) still gets the file.
    assert client_alice.get(_url(run, name), HTTP_HX_REQUEST="true")["Content-Disposition"].startswith("attachment")


def test_exports_link_to_the_address_the_console_was_reached_at(client_alice, run, settings):
    """SITE_URL unset: the request's own host, not a default port 8000; set, SITE_URL wins."""
    settings.SITE_URL, settings.SITE_URL_EXPLICIT = "http://127.0.0.1:8000", False
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    page = reverse("runs:detail", args=[run.agent_id, run.pk])
    host = {"HTTP_HOST": "127.0.0.1:8001"}
    data = json.loads(client_alice.get(_url(run, "runs:export_json"), **host).content)
    assert data["run"]["url"] == f"http://127.0.0.1:8001{page}"
    html = client_alice.get(_url(run, "runs:export_html"), **host).content.decode()
    assert f'href="http://127.0.0.1:8001{page}"' in html
    workbook = load_workbook(io.BytesIO(client_alice.get(_url(run, "runs:export_xlsx"), **host).content))
    assert dict(workbook["Summary"].values)["Link"] == f"http://127.0.0.1:8001{page}"

    settings.SITE_URL, settings.SITE_URL_EXPLICIT = "https://evalsite.example.com", True
    data = json.loads(client_alice.get(_url(run, "runs:export_json"), **host).content)
    assert data["run"]["url"] == f"https://evalsite.example.com{page}"
