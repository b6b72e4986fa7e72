"""CSRF on every state change (check 2 in docs/architecture.md).

Every route of the URL conf gets a POST from a signed-in owner whose client enforces CSRF
and sends no token, as a plain form and as htmx: the answer is Django's CSRF refusal (403),
or 405 for a view that takes no POST, and nothing in the database or storage changes. The
same POST with the token gets past the check, which shows the refusal was the token's doing.
The JSON API takes no cookies: a session alone gets 401 there, so it needs no CSRF token.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from tests.security.routes import api_operations, console_routes
from tests.security.state import snapshot
from tests.test_permissions import _url

ROUTES = console_routes()
API_OPERATIONS = api_operations()
CSRF_REFUSAL = b"CSRF verification failed"
# Plausible form fields, so a view that forgot CSRF would have something to act on.
PROBE = {
    "name": "CSRF probe",
    "question": "CSRF probe?",
    "expected_answer": "CSRF probe",
    "role": "member",
    "username": "alice",
    "password": "correct horse battery staple",
    "confirm": "yes",
    "direction": "up",
}
# Routes a machine posts to with a key of its own, never a browser's session: the OTLP receiver
# (tests/monitoring/test_ingest_*). A session alone gets its 401, as on the JSON API.
KEY_AUTHENTICATED = {"ingest:traces"}
HTMX = {"HX-Request": "true", "HX-Current-URL": "http://testserver/agents/"}


def _enforcing_client(user=None) -> Client:  # type: ignore[no-untyped-def]
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return client


def test_the_sweep_covers_state_changing_routes_of_every_area():
    names = {route.name for route in ROUTES}

    assert {"accounts:login", "accounts:logout", "agents:delete", "datasets:upload", "datasets:case_edit"} <= names
    assert {"runs:start", "runs:stop", "accounts:token_create"} <= names
    assert not any(name.startswith(("admin:", "api:")) for name in names)


@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_a_post_without_a_csrf_token_is_refused_and_changes_nothing(alice, stored_objects, route, htmx):
    client = _enforcing_client(alice)
    url = _url(route, stored_objects)
    before = snapshot()

    response = client.post(url, PROBE, headers=HTMX if htmx else {})

    if route.name in KEY_AUTHENTICATED:
        assert response.status_code == 401, f"POST {url} with a session and no key answered {response.status_code}"
        assert snapshot() == before
        return
    assert response.status_code in (403, 405), f"POST {url} without a CSRF token answered {response.status_code}"
    if response.status_code == 403:
        assert CSRF_REFUSAL in response.content, f"POST {url} was refused, but not by the CSRF check"
    assert snapshot() == before, f"POST {url} without a CSRF token changed something"


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_the_same_post_with_the_token_gets_past_the_csrf_check(alice, stored_objects, route):
    client = _enforcing_client(alice)
    client.get(reverse("agents:list"))  # every page sets the token cookie (base.html's hx-headers)
    token = client.cookies["csrftoken"].value

    response = client.post(_url(route, stored_objects), PROBE, headers={"X-CSRFToken": token})

    assert CSRF_REFUSAL not in response.content
    assert response.status_code < 500


def test_signing_in_needs_a_csrf_token_too(alice):
    """Login CSRF: a hostile page must not sign a visitor into the attacker's account."""
    client = _enforcing_client()
    data = {"username": "alice", "password": "correct horse battery staple"}

    response = client.post(reverse("accounts:login"), data)

    assert response.status_code == 403 and CSRF_REFUSAL in response.content
    assert "_auth_user_id" not in client.session


@pytest.mark.parametrize("operation", API_OPERATIONS, ids=str)
def test_a_session_cookie_alone_opens_no_api_operation(alice, url_objects, operation):
    """The API is csrf-exempt by design (bearer tokens, never cookies): a browser session gets 401."""
    client = _enforcing_client(alice)
    before = snapshot()

    response = client.generic(
        operation.method,
        operation.url(url_objects),
        json.dumps(operation.body) if operation.body is not None else "",
        content_type="application/json",
    )

    assert response.status_code == 401, f"{operation} with a session cookie answered {response.status_code}"
    assert snapshot() == before
