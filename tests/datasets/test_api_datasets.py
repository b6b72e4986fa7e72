"""JSON API: datasets (/api/agents/{agent_id}/eval/datasets)."""

import pytest
from django.test import Client

from accounts.services import api_token_create
from datasets.models import Dataset
from tests.factories import DatasetFactory, TestCaseFactory


def _api(user) -> Client:
    _token, raw = api_token_create(user=user, name="ci")
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _url(agent, dataset_id: int | None = None) -> str:
    base = f"/api/agents/{agent.pk}/eval/datasets"
    return base if dataset_id is None else f"{base}/{dataset_id}"


@pytest.mark.django_db
def test_create_a_dataset_with_a_token(alice, agent):
    response = _api(alice).post(
        _url(agent),
        {"name": "CI smoke", "pass_threshold": 8, "acceptance_criteria": "Cites the policy."},
        content_type="application/json",
    )

    assert response.status_code == 201
    body = response.json()
    dataset = Dataset.objects.get(pk=body["id"])
    assert dataset.agent == agent and dataset.created_by == alice
    assert body["name"] == "CI smoke" and body["pass_threshold"] == 8 and body["case_count"] == 0
    assert body["status"] == "ready" and body["number_of_requests"] == 1 and body["jaccard_enabled"] is True


@pytest.mark.django_db
def test_validation_errors_name_their_field(alice, agent):
    DatasetFactory(agent=agent, name="Taken")
    api = _api(alice)

    duplicate = api.post(_url(agent), {"name": "taken"}, content_type="application/json")
    out_of_range = api.post(_url(agent), {"name": "x", "pass_threshold": 11}, content_type="application/json")
    missing = api.post(_url(agent), {}, content_type="application/json")

    assert duplicate.status_code == 422
    assert duplicate.json()["detail"] == [
        {
            "type": "value_error",
            "loc": ["body", "payload", "name"],
            "msg": "This agent already has a dataset named “taken”. Choose another name.",
        }
    ]
    assert out_of_range.status_code == 422 and out_of_range.json()["detail"][0]["loc"][-1] == "pass_threshold"
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"][-1] == "name"


@pytest.mark.django_db
def test_list_is_paginated_with_case_counts(alice, agent):
    for index in range(3):
        TestCaseFactory.create_batch(index, dataset=DatasetFactory(agent=agent, name=f"Set {index}"))

    body = _api(alice).get(_url(agent), {"limit": 2, "offset": 0}).json()
    rest = _api(alice).get(_url(agent), {"limit": 2, "offset": 2}).json()

    assert body["count"] == 3
    assert [item["name"] for item in body["items"]] == ["Set 2", "Set 1"]
    assert [item["case_count"] for item in body["items"]] == [2, 1]
    assert [item["name"] for item in rest["items"]] == ["Set 0"]


@pytest.mark.django_db
def test_get_patch_and_delete_a_dataset(alice, agent):
    dataset = DatasetFactory(agent=agent, name="Before")
    api = _api(alice)

    assert api.get(_url(agent, dataset.pk)).json()["name"] == "Before"
    patched = api.patch(
        _url(agent, dataset.pk), {"name": "After", "vector_enabled": True}, content_type="application/json"
    )
    assert patched.status_code == 200
    assert patched.json()["name"] == "After" and patched.json()["vector_enabled"] is True
    dataset.refresh_from_db()
    assert dataset.pass_threshold == 7  # untouched

    deleted = api.delete(_url(agent, dataset.pk))
    assert deleted.status_code == 204
    assert not Dataset.objects.filter(pk=dataset.pk).exists()


@pytest.mark.django_db
def test_another_teams_token_gets_404_everywhere(charlie, agent):
    dataset = DatasetFactory(agent=agent, name="Private")
    api = _api(charlie)

    assert api.get(_url(agent)).status_code == 404
    assert api.post(_url(agent), {"name": "Mine"}, content_type="application/json").status_code == 404
    assert api.get(_url(agent, dataset.pk)).status_code == 404
    assert api.patch(_url(agent, dataset.pk), {"name": "Pwned"}, content_type="application/json").status_code == 404
    assert api.delete(_url(agent, dataset.pk)).status_code == 404
    dataset.refresh_from_db()
    assert dataset.name == "Private"


@pytest.mark.django_db
def test_a_dataset_of_another_agent_is_404(alice, agent, team):
    from tests.factories import AgentFactory

    dataset = DatasetFactory(agent=AgentFactory(team=team))

    assert _api(alice).get(_url(agent, dataset.pk)).status_code == 404


@pytest.mark.django_db
def test_no_token_or_a_revoked_token_is_401(alice, agent):
    from accounts.services import api_token_revoke

    token, raw = api_token_create(user=alice, name="old")
    api_token_revoke(token=token)

    assert Client().get(_url(agent)).status_code == 401
    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get(_url(agent)).status_code == 401


@pytest.mark.django_db
def test_wrong_method_is_405(alice, agent):
    assert _api(alice).put(_url(agent), {}, content_type="application/json").status_code == 405


@pytest.mark.django_db
def test_unknown_fields_in_a_dataset_body_are_a_422(alice, agent):
    api = _api(alice)
    url = f"/api/agents/{agent.pk}/eval/datasets"
    response = api.post(url, {"name": "Set", "threshold": 9}, content_type="application/json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "threshold"
    assert not Dataset.objects.filter(agent=agent).exists()
