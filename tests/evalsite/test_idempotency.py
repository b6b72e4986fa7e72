"""Idempotency keys on the API's creations (evalsite/idempotency.py), through the agents API."""

import pytest

from accounts.services import api_token_create
from agents.models import Agent
from agents.services import agent_delete

pytestmark = pytest.mark.django_db
JSON = "application/json"
BODY = {"name": "FAQ", "kind": "knowledge", "knowledge": "Refunds: 30 days."}


def _auth(user):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=user, name='ci')[1]}"}


def _create(client, user, key, body=BODY):
    return client.post("/api/agents", body, content_type=JSON, HTTP_IDEMPOTENCY_KEY=key, **_auth(user))


def test_a_key_is_the_users_own(client, alice, bob, team):
    first = _create(client, alice, "same")
    second = _create(client, bob, "same", {**BODY, "name": "FAQ 2"})

    assert (first.status_code, second.status_code) == (201, 201)
    assert Agent.objects.filter(team=team).count() == 2


@pytest.mark.parametrize("key", ["k" * 256, "clé-1"])
def test_a_key_too_long_or_not_ascii_is_a_422_naming_the_header(client, alice, key):
    response = client.post(
        "/api/agents", BODY, content_type=JSON, HTTP_IDEMPOTENCY_KEY=key.encode().decode("latin-1"), **_auth(alice)
    )

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    assert not Agent.objects.exists()


def test_a_key_whose_object_was_deleted_is_a_409(client, alice):
    made = _create(client, alice, "k")
    agent_delete(agent=Agent.objects.get(pk=made.json()["id"]))

    replay = _create(client, alice, "k")

    assert replay.status_code == 409
    assert replay.json() == {"detail": "What this Idempotency-Key created has been deleted since. Use a new key."}


def test_a_refused_creation_spends_no_key(client, alice):
    refused = _create(client, alice, "k", {**BODY, "knowledge": ""})
    made = _create(client, alice, "k")

    assert (refused.status_code, made.status_code) == (422, 201)
