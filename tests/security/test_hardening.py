"""CSP on every HTML response, NUL characters refused in one place, API errors always JSON."""

import json

import pytest
from django.test import Client

from accounts.services import api_token_create
from evalsite.middleware import CONTENT_SECURITY_POLICY
from tests.factories import DatasetFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/accounts/login/", "/agents/", "/nothing-here/", "/api/docs"])
def test_html_responses_carry_the_content_security_policy(client_alice, url):
    response = client_alice.get(url)
    assert response["Content-Type"].startswith("text/html")
    policy = response["Content-Security-Policy"]
    assert policy == CONTENT_SECURITY_POLICY
    for directive in ("default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"):
        assert directive in policy
    assert "unsafe-eval" not in policy and "'unsafe-inline'" not in policy.split("style-src-attr")[0]


def test_json_responses_carry_no_page_policy(client_alice):
    assert "Content-Security-Policy" not in Client().get("/healthz")


def test_swagger_ui_is_served_locally(client_alice):
    page = client_alice.get("/api/docs").content.decode()
    assert "cdn" not in page.lower()
    assert "/static/ninja/swagger-ui-bundle.js" in page
    assert Client().get("/static/ninja/swagger-ui-bundle.js").status_code == 200


def test_no_template_has_an_inline_script_or_event_handler():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "templates"
    offenders = []
    for path in root.rglob("*.html"):
        if path.name == "report.html":  # the standalone exported report: a file, never served as a page
            continue
        text = path.read_text()
        if re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", text):
            offenders.append(f"{path.name}: inline <script>")
        if re.search(r"\son[a-z]+\s*=", text):
            offenders.append(f"{path.name}: on*= handler")
    assert offenders == []


# ---- NUL characters ----------------------------------------------------------------------


def test_a_nul_in_the_query_string_is_refused_with_a_page(client_alice, agent):
    response = client_alice.get(f"/agents/{agent.pk}/datasets/?q=a%00b")
    assert response.status_code == 400
    assert "NUL character" in response.content.decode()
    assert "query string" in response.content.decode()


def test_a_nul_in_a_form_field_is_refused(client_alice, agent):
    response = client_alice.post(f"/agents/{agent.pk}/datasets/create/", {"name": "evil\x00name"})
    assert response.status_code == 400
    assert "form field “name”" in response.content.decode()


def test_an_htmx_request_gets_the_message_as_text(client_alice, agent):
    response = client_alice.get(f"/agents/{agent.pk}/datasets/?q=%00", headers={"HX-Request": "true"})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")


def _api(user, **kwargs) -> Client:
    _, secret = api_token_create(user=user, name="ci")
    return Client(headers={"Authorization": f"Bearer {secret}"}, **kwargs)


def test_a_nul_in_an_api_body_is_refused_as_json(alice, agent):
    url = f"/api/agents/{agent.pk}/eval/datasets"
    response = _api(alice).post(url, data='{"name": "a\\u0000b"}', content_type="application/json")
    assert response.status_code == 400
    assert "NUL character" in response.json()["detail"]


def test_an_escaped_backslash_before_u0000_is_not_a_nul(client_alice):
    from evalsite.middleware import _json_has_nul

    assert not _json_has_nul(json.dumps({"text": "C:\\u0000 is a path"}))
    assert _json_has_nul('{"text": "a\\u0000"}')


def test_a_nul_in_a_json_import_upload_is_refused(client_alice, agent):
    from django.core.files.uploadedfile import SimpleUploadedFile

    dataset = DatasetFactory(agent=agent)
    upload = SimpleUploadedFile("cases.json", b'{"eval_cases": []}', content_type="application/json")
    response = client_alice.post(
        f"/agents/{agent.pk}/datasets/{dataset.pk}/import/json/", {"file": upload, "note": "x\x00"}
    )
    assert response.status_code == 400


# ---- API errors are JSON -------------------------------------------------------------------


def test_an_unknown_api_path_is_a_json_404(client):
    response = client.get("/api/no-such-thing")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_a_wrong_method_on_the_api_is_a_json_405(alice, agent):
    response = _api(alice).put(f"/api/agents/{agent.pk}/eval/datasets", {}, content_type="application/json")
    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"


def test_an_unexpected_api_error_is_a_json_500(alice, monkeypatch):
    from runs import api as runs_api

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(runs_api.selectors, "run_get_for_user", boom)
    response = _api(alice, raise_request_exception=False).get("/api/runs/1")
    assert response.status_code == 500
    assert response.json()["detail"].startswith("Internal server error")
    assert "kaboom" not in response.content.decode()
