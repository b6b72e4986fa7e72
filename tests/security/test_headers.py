"""Security headers on every response of the console (checks 2, 7 and 8 in docs/architecture.md).

Every page and fragment: `X-Frame-Options: DENY` and `X-Content-Type-Options: nosniff`.
The one documented exception is the PDF for the preview dialog's <iframe>
(datasets:document_view): SAMEORIGIN, inline, and `Content-Security-Policy: sandbox`,
which gives it an opaque origin of its own. Every other file leaves as an attachment.
No header ever carries a CR or LF that came from a file or dataset name.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from datasets.models import Dataset, Document
from tests.security.routes import console_routes
from tests.test_permissions import _url

ROUTES = console_routes()
INLINE_PDF = "datasets:document_view"
HOSTILE_NAME = "report\r\nSet-Cookie: owned=1\r\nX-Injected: yes\r\n\r\n<script>alert(1)</script>.pdf"


def _get(client: Client, url: str, *, htmx: bool):  # type: ignore[no-untyped-def]
    return client.get(url, headers={"HX-Request": "true"} if htmx else {})


def _assert_no_injected_header(response) -> None:  # type: ignore[no-untyped-def]
    for name, value in response.items():
        assert "\r" not in value and "\n" not in value, f"{name}: {value!r}"
    assert "X-Injected" not in response
    assert "owned" not in response.cookies


def test_the_routes_include_every_file_view():
    names = {route.name for route in ROUTES}

    assert {INLINE_PDF, "datasets:document_download", "datasets:export_csv", "runs:document_signed"} <= names


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_every_response_forbids_framing_and_sniffing(client_alice, stored_objects, route, htmx):
    url = _url(route, stored_objects)

    response = _get(client_alice, url, htmx=htmx)

    assert response.status_code < 500, f"GET {url} answered {response.status_code}"
    assert response["X-Content-Type-Options"] == "nosniff", url
    if route.name == INLINE_PDF:
        assert response.status_code == 200
        assert response["X-Frame-Options"] == "SAMEORIGIN"
        assert response["Content-Type"] == "application/pdf"
        assert response["Content-Disposition"].startswith("inline")
        assert response["Content-Security-Policy"].split(";")[0].strip() == "sandbox"
        return
    assert response["X-Frame-Options"] == "DENY", url
    if response["Content-Type"].startswith("text/html"):
        assert "default-src 'self'" in response["Content-Security-Policy"], url
    if route.name == "healthz":  # the status endpoint for load balancers: JSON, not a file
        assert response["Content-Type"] == "application/json", url
        return
    disposition = response.get("Content-Disposition", "")
    if disposition or not response["Content-Type"].startswith("text/html"):
        # A file, not a page: only ever a download.
        assert response.status_code == 200 and disposition.startswith("attachment"), f"{url}: {disposition!r}"


def test_error_pages_and_the_sign_in_page_carry_the_headers_too(client, client_alice, db):
    for response in (
        client.get(reverse("accounts:login")),
        client_alice.get("/agents/999999/"),
        client_alice.get("/no/such/page/"),
    ):
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("name", ["datasets:document_download", "runs:document_signed"])
def test_original_uploads_are_attachments_with_nosniff(client, client_alice, stored_objects, name):
    # The signed link is for HTTP agents: no session, the link is the key.
    response = (client if name == "runs:document_signed" else client_alice).get(
        reverse(name, kwargs={p: stored_objects[p] for p in _params_of(name)})
    )

    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"


@pytest.mark.parametrize(
    "name", ["datasets:document_download", INLINE_PDF, "runs:document_signed", "datasets:document_preview"]
)
def test_a_hostile_stored_file_name_never_splits_a_header(client, client_alice, stored_objects, name):
    """Names are cleaned at upload, but a row written another way (API, admin, an older
    release) must still not inject headers."""
    Document.objects.filter(pk=stored_objects["document_id"]).update(original_name=HOSTILE_NAME)
    url = reverse(name, kwargs={p: stored_objects[p] for p in _params_of(name)})

    response = (client if name == "runs:document_signed" else client_alice).get(url)

    assert response.status_code == 200
    _assert_no_injected_header(response)


@pytest.mark.parametrize("name", ["datasets:export_csv", "datasets:export_json"])
def test_a_hostile_dataset_name_never_splits_the_export_header(client_alice, stored_objects, name):
    Dataset.objects.filter(pk=stored_objects["dataset_id"]).update(name=HOSTILE_NAME[:120])

    response = client_alice.get(reverse(name, args=[stored_objects["agent_id"], stored_objects["dataset_id"]]))

    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    _assert_no_injected_header(response)


def _params_of(name: str) -> tuple[str, ...]:
    return next(route.params for route in ROUTES if route.name == name)
