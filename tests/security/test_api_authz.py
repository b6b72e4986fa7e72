"""The JSON API's authorisation matrix, generated from its OpenAPI schema.

For every operation whose path names objects (agent, dataset, item, run...):
- no token: 401;
- a token of another team: 404, as if the object did not exist, and nothing changes;
- a token of alice's own team opens it (so the 404s above are about the team, not the URL);
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


def _call(operation, url: str, token: str | None = None):  # type: ignore[no-untyped-def]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = json.dumps(operation.body) if operation.body is not None else ""
    return Client().generic(operation.method, url, body, content_type="application/json", headers=headers)


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
def test_a_token_of_the_team_opens_it(url_objects, bob_token, operation):
    response = _call(operation, operation.url(url_objects), bob_token)

    assert response.status_code not in (401, 403, 404, 405, 422), (
        f"{operation} for a teammate answered {response.status_code}: {response.content[:300]!r}"
    )
    assert response.status_code < 500


@pytest.mark.parametrize("operation", NESTED_OPERATIONS, ids=str)
def test_objects_of_another_agent_of_the_team_are_404(url_objects, bob_token, team, operation):
    other_agent = AgentFactory(team=team, name="Another agent")
    before = snapshot()

    response = _call(operation, operation.url({**url_objects, "agent_id": other_agent.pk}), bob_token)

    assert response.status_code == 404, f"{operation} across agents answered {response.status_code}"
    assert snapshot() == before
