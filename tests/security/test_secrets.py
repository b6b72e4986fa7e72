"""The header values of an HTTP agent are write-only (they hold the team's API keys):
no page, fragment, download or API response may contain them.

Generated from the URL conf and the API schema, so a page added later (the run review
pages, say) is checked without touching this file. tests/agents/test_header_secrets.py
covers the agent pages and the admin by hand.
"""

from __future__ import annotations

import pytest
from django.test import Client

from accounts import services as account_services
from agents.models import Agent, AgentVersion
from tests.security.routes import api_operations, console_routes
from tests.test_permissions import _url

SECRET = "sk-live-SECRET-never-shown-7c1f"
SECRET_2 = "tok-SECRET-two-never-shown-99ab"
ROUTES = [route for route in console_routes() if route.name != "accounts:logout"]
API_READS = [operation for operation in api_operations() if operation.method == "GET"]


@pytest.fixture
def secret_objects(stored_objects):
    """The matrix's agent turned into an HTTP agent whose version (used by the run) holds secrets."""
    Agent.objects.filter(pk=stored_objects["agent_id"]).update(kind=Agent.Kind.HTTP)
    AgentVersion.objects.filter(agent_id=stored_objects["agent_id"]).update(
        http_url="https://agent.example.com/answer",
        http_headers={"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET_2},
    )
    return stored_objects


def _assert_no_secret(response, where: str) -> None:  # type: ignore[no-untyped-def]
    content = b"".join(response.streaming_content) if response.streaming else response.content
    for secret in (SECRET, SECRET_2):
        assert secret.encode() not in content, f"{where} shows a header value"
        assert all(secret not in value for _, value in response.items()), f"{where} sends a header value"


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_no_page_or_fragment_shows_a_header_value(client_alice, secret_objects, route, htmx):
    url = _url(route, secret_objects)

    response = client_alice.get(url, headers={"HX-Request": "true"} if htmx else {})

    assert response.status_code < 500
    _assert_no_secret(response, f"GET {url}")


@pytest.mark.parametrize("operation", API_READS, ids=str)
def test_no_api_response_shows_a_header_value(alice, secret_objects, operation):
    _, token = account_services.api_token_create(user=alice, name="reader")

    response = Client().get(operation.url(secret_objects), headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 200, f"{operation}: {response.status_code}"
    _assert_no_secret(response, str(operation))
