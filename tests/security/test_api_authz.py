"""The JSON API's authorisation matrix, generated from its OpenAPI schema.

For every operation whose path names objects (agent, dataset, item, run...):
- no token: 401;
- a token of another team: 404, as if the object did not exist, and nothing changes;
- a token of alice's own team opens it (so the 404s above are about the team, not the URL),
  except the team's owner-only settings (a member gets the page's 403) and what is one
  user's own (an API token, a playground exchange: a teammate gets 404, their owner opens it);
- objects of alice's team that do not belong together (agent B's URL, agent A's dataset): 404.
An operation added later is in the matrix automatically; a new path parameter fails the
matrix until tests/security/routes.py knows which object fills it.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from accounts import services as account_services
from tests.factories import AgentFactory
from tests.security.routes import api_operations
from tests.security.state import snapshot

OPERATIONS = api_operations()
OBJECT_OPERATIONS = [operation for operation in OPERATIONS if operation.params]
NESTED_OPERATIONS = [
    operation for operation in OBJECT_OPERATIONS if "agent_id" in operation.params and len(operation.params) > 1
]


def _call(operation, url: str, token: str | None = None, body: object = None):  # type: ignore[no-untyped-def]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if operation.multipart:
        return Client().post(url, operation.form_data(), headers=headers)
    body = body if body is not None else operation.body
    body = json.dumps(body) if body is not None else ""
    return Client().generic(operation.method, url, body, content_type="application/json", headers=headers)


# The team's settings that only an owner may change, as on the Team settings and Monitoring
# settings pages (alice owns the team, bob is a member), with the sentence a member is refused by.
TEAM = "Only team owners can manage the team."
MONITORING = "Only team owners can change the monitoring settings."
OWNER_ONLY = {
    "PATCH /api/teams/{team_id}": TEAM,
    "PUT /api/teams/{team_id}/budgets": TEAM,
    "POST /api/teams/{team_id}/members": TEAM,
    "PATCH /api/teams/{team_id}/members/{membership_id}": TEAM,
    "POST /api/teams/{team_id}/monitoring/keys": MONITORING,
    "POST /api/teams/{team_id}/monitoring/keys/{key_id}/revoke": MONITORING,
    "POST /api/teams/{team_id}/monitoring/services": MONITORING,
    "DELETE /api/teams/{team_id}/monitoring/services/{mapping_id}": MONITORING,
    "PUT /api/teams/{team_id}/monitoring/retention": MONITORING,
    "PUT /api/agents/{agent_id}/monitoring/masking": MONITORING,
}
# One user's own: their API tokens and their playground exchanges (the playground lists only
# the user's own chats). url_objects makes them alice's.
PERSONAL = {
    "POST /api/tokens/{token_id}/revoke",
    "GET /api/agents/{agent_id}/playground/exchanges/{exchange_id}",
    "POST /api/agents/{agent_id}/playground/exchanges/{exchange_id}/save-case",
}


@pytest.fixture
def alice_token(alice) -> str:
    return account_services.api_token_create(user=alice, name="owner")[1]


@pytest.fixture
def charlie_token(charlie) -> str:
    return account_services.api_token_create(user=charlie, name="outsider")[1]


@pytest.fixture
def bob_token(bob) -> str:
    return account_services.api_token_create(user=bob, name="teammate")[1]


def test_the_matrix_sees_every_router():
    paths = {operation.path for operation in OPERATIONS}

    assert "/api/me" in paths
    assert any("/eval/datasets/{dataset_id}/items/{item_id}" in path for path in paths)
    assert any(path.startswith("/api/runs/") for path in paths)
    assert {operation.method for operation in OBJECT_OPERATIONS} >= {"GET", "POST", "PATCH", "DELETE"}


@pytest.mark.parametrize("operation", OPERATIONS, ids=str)
def test_without_a_token_every_operation_is_401(url_objects, operation):
    assert _call(operation, operation.url(url_objects)).status_code == 401


@pytest.mark.parametrize("operation", OBJECT_OPERATIONS, ids=str)
def test_a_token_of_another_team_gets_404_and_changes_nothing(url_objects, charlie_token, operation):
    before = snapshot()

    response = _call(operation, operation.url(url_objects), charlie_token)

    assert response.status_code == 404, f"{operation} with another team's token answered {response.status_code}"
    assert snapshot() == before


@pytest.mark.parametrize("operation", OBJECT_OPERATIONS, ids=str)
def test_a_token_of_the_team_opens_it(url_objects, alice_token, bob_token, charlie, media_root, operation):
    if str(operation) in OWNER_ONLY:
        before = snapshot()
        refused = _call(operation, operation.url(url_objects), bob_token)
        assert refused.status_code == 403, f"{operation} for a member answered {refused.status_code}"
        assert refused.json()["detail"] == OWNER_ONLY[str(operation)]
        assert snapshot() == before
    if str(operation) in PERSONAL:
        before = snapshot()
        assert _call(operation, operation.url(url_objects), bob_token).status_code == 404
        assert snapshot() == before
    token = alice_token if str(operation) in OWNER_ONLY.keys() | PERSONAL else bob_token

    # Bodies that name another object: the schema's minimal body names nobody and dataset 1.
    bodies = {
        "POST /api/teams/{team_id}/members": {"username": charlie.username},
        "POST /api/agents/{agent_id}/playground/exchanges/{exchange_id}/save-case": {
            "dataset": url_objects["dataset_id"]
        },
        "POST /api/agents/{agent_id}/evaluators": {"name": "Security probe"},
        "POST /api/agents/{agent_id}/learning-cases/{learning_case_id}/approve": {
            "dataset_id": url_objects["dataset_id"],
            "expected_answer": "Refunds within 30 days.",
        },
        "POST /api/teams/{team_id}/monitoring/services": {
            "service_name": "security-probe",
            "agent_id": url_objects["agent_id"],
        },
    }
    body = bodies.get(str(operation))

    response = _call(operation, operation.url(url_objects), token, body)

    assert response.status_code not in (401, 403, 404, 405, 422), (
        f"{operation} for a teammate answered {response.status_code}: {response.content[:300]!r}"
    )
    assert response.status_code < 500


def test_the_exceptions_to_the_matrix_are_operations_of_the_api():
    assert OWNER_ONLY.keys() | PERSONAL <= {str(operation) for operation in OBJECT_OPERATIONS}


@pytest.mark.parametrize("operation", NESTED_OPERATIONS, ids=str)
def test_objects_of_another_agent_of_the_team_are_404(url_objects, bob_token, team, operation):
    other_agent = AgentFactory(team=team, name="Another agent")
    before = snapshot()

    response = _call(operation, operation.url({**url_objects, "agent_id": other_agent.pk}), bob_token)

    assert response.status_code == 404, f"{operation} across agents answered {response.status_code}"
    assert snapshot() == before
