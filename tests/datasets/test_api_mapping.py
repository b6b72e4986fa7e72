"""The API's side of the mapping step: the dataset shows its tables and warnings, and
POST .../mapping confirms a (changed) mapping."""

import pytest
from django.test import Client

from accounts.services import api_token_create
from datasets.extraction.services import dataset_extract
from datasets.models import Dataset
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401
from tests.datasets.test_extraction_mapping import _plan_workbook

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Tables need no model."""


@pytest.fixture
def api_client(alice) -> Client:
    _token, raw = api_token_create(user=alice, name="ci")
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _url(dataset: Dataset, tail: str = "") -> str:
    return f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}{tail}"


def test_the_dataset_shows_the_mapping_and_a_changed_one_is_honoured(
    api_client, agent, django_capture_on_commit_callbacks
):
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)

    detail = api_client.get(_url(dataset)).json()
    assert detail["status"] == "review"
    assert detail["mapping"]["tables"][0]["columns"][3]["field"] == "question"

    with django_capture_on_commit_callbacks() as callbacks:
        response = api_client.post(
            _url(dataset, "/mapping"), {"mapping": {"Scenario": "question"}}, content_type="application/json"
        )
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "extracting" and len(callbacks) == 1
    dataset_extract(dataset_id=dataset.pk)

    items = api_client.get(_url(dataset, "/items")).json()["items"]
    assert [item["question"] for item in items] == ["Refunds", "Refunds", "Support hours"]
    assert items[0]["metadata"]["Question"] == "Can I get a refund 40 days after purchase?"
    assert items[0]["import_warnings"] == []


def test_a_bad_mapping_is_a_422_naming_the_problem(api_client, agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)

    response = api_client.post(
        _url(dataset, "/mapping"), {"mapping": {"Cases": {"Question": "question"}}}, content_type="application/json"
    )

    assert response.status_code == 422
    assert "No sheet or table is named “Cases”" in response.json()["detail"][0]["msg"]


def test_a_dataset_not_waiting_for_a_mapping_is_a_409(api_client, agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook())

    response = api_client.post(_url(dataset, "/mapping"), {}, content_type="application/json")

    assert response.status_code == 409 and "not waiting for a column mapping" in response.content.decode()


@pytest.mark.parametrize(
    "raw",
    [
        {"*": "skip", "Test plan": {"Scenario": "question"}},
        {"Test plan": {"Scenario": "question"}, "*": "skip"},
        {"*": "skip", "Test plan": "include"},
    ],
    ids=["star-first", "star-last", "star-and-include"],
)
def test_star_is_every_table_a_named_key_does_not_name(api_client, agent, raw):
    """The docstring offers "*" for every table: a sheet named beside it wins, whatever the key order
    (issue 48: {"*": "skip", "Test plan": {...}} was refused with 422 "Every table is skipped")."""
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)

    response = api_client.post(_url(dataset, "/mapping"), {"mapping": raw}, content_type="application/json")

    assert response.status_code == 202, response.content
    dataset_extract(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    assert dataset.cases.count() == 3
    assert dataset.mapping["chosen"]["tables"]["1"]["skip"] is True  # the Glossary, by "*"


def test_star_alone_maps_every_table(api_client, agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)

    response = api_client.post(
        _url(dataset, "/mapping"), {"mapping": {"*": {"Scenario": "question"}}}, content_type="application/json"
    )

    assert response.status_code == 202, response.content
    assert dataset.__class__.objects.get(pk=dataset.pk).mapping["chosen"]["tables"]["0"]["columns"]["2"] == "question"
