"""No web request waits for a model: every page, fragment, form post and API operation
answers without a single call reaching the (fake) model server.

A model call may take minutes (the gateway's timeout times its retries) and gunicorn gives
a request 60 s, so work that needs a model is a job: the request records it and enqueues it
after commit (docs/architecture.md, "Where logic lives"). The test database never commits
here, so a request that only enqueues sends nothing, and any request the server sees came
from the view itself. Generated from the URL conf and the API schema, like the rest of
tests/security/, with the POST data of tests/security/test_secrets.py, so a view added later
is checked without touching this file.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from accounts import services as account_services
from suggestions.models import Suggestion
from tests.security.routes import api_operations, console_routes
from tests.security.test_secrets import POSTS
from tests.test_permissions import _url

ROUTES = [route for route in console_routes() if route.name != "accounts:logout"]
GET_ROUTES = [route for route in ROUTES if route.name not in POSTS]
POST_ROUTES = [route for route in ROUTES if route.name in POSTS]


@pytest.fixture
def objects(stored_objects, fake_llm):
    """The matrix's objects with a model configured (the fake server), which answers anything."""
    fake_llm.add_rule(task="rewrite", json={"text": "Answer briefly and politely."})
    return dict(stored_objects)


def _assert_no_model_call(fake_llm, where: str) -> None:  # type: ignore[no-untyped-def]
    tasks = [request.task for request in fake_llm.requests]
    assert not tasks, f"{where} called the model during the request ({', '.join(tasks)}): make it a job"


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize("route", GET_ROUTES, ids=str)
def test_no_page_or_fragment_calls_the_model(client_alice, objects, fake_llm, route, htmx):
    url = _url(route, objects)

    response = client_alice.get(url, headers={"HX-Request": "true"} if htmx else {})

    assert response.status_code < 500, f"GET {url}: {response.status_code}"
    _assert_no_model_call(fake_llm, f"GET {url}")


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize("route", POST_ROUTES, ids=str)
def test_no_form_post_calls_the_model(client_alice, objects, fake_llm, route, htmx):
    post = POSTS[route.name]
    post.setup(objects)
    url = _url(route, objects)

    response = client_alice.post(url, post.data(objects), headers={"HX-Request": "true"} if htmx else {})

    assert response.status_code < 500, f"POST {url}: {response.status_code}"
    _assert_no_model_call(fake_llm, f"POST {url}")


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_apply_step_one_starts_the_rewrite_without_calling_the_model(client_alice, objects, fake_llm, htmx):
    """Step 1 of the Apply dialog used to ask the model to rewrite each field inside the request."""
    suggestion = Suggestion.objects.get(pk=objects["suggestion_id"])
    data = {"s-TOTAL_FORMS": "1", "s-INITIAL_FORMS": "1", "s-0-id": str(suggestion.pk), "s-0-selected": "on",
            "s-0-title": suggestion.title, "s-0-category": suggestion.category,
            "s-0-description": suggestion.description}  # fmt: skip
    url = reverse("suggestions:apply", args=[objects["agent_id"], objects["run_id"]])

    response = client_alice.post(url, data, headers={"HX-Request": "true"} if htmx else {})

    _assert_no_model_call(fake_llm, f"POST {url}")
    assert response.status_code == (200 if htmx else 302)
    assert suggestion.run.rewrite_jobs.filter(status="queued").exists()  # the work is a job


@pytest.mark.parametrize("operation", api_operations(), ids=str)
def test_no_api_operation_calls_the_model(alice, objects, fake_llm, operation):
    _, token = account_services.api_token_create(user=alice, name="no-model")
    body = json.dumps(operation.body) if operation.body is not None else ""

    response = Client().generic(
        operation.method, operation.url(objects), body, content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )  # fmt: skip

    assert response.status_code < 500, f"{operation}: {response.status_code}"
    _assert_no_model_call(fake_llm, str(operation))
