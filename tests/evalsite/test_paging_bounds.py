"""Paging past what the database can count (issue 34, item 8): an offset or limit of 2**63 or
more failed the query ("bigint out of range" on PostgreSQL, an OverflowError on SQLite), a 500
on every paged endpoint and on the runs list. The API refuses it (422, a documented bad
parameter); the pages clamp it."""

import pytest
from django.urls import reverse

from accounts.services import api_token_create
from tests.factories import DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db

HUGE = 2**63
PAGED = [
    "/api/agents/{agent}/runs",
    "/api/runs/{run}/results",
    "/api/agents/{agent}/eval/datasets",
    "/api/agents/{agent}/eval/datasets/{dataset}/items",
    "/api/runs/{run}/reviews",
]


@pytest.fixture
def run(agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset)
    return build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])


@pytest.fixture
def bearer(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=alice, name='ci')[1]}"}


@pytest.mark.parametrize("path", PAGED)
@pytest.mark.parametrize("param", ["offset", "limit"])
@pytest.mark.parametrize("value", [HUGE, HUGE * 4, 10**30])
def test_a_huge_offset_or_limit_is_a_bad_parameter_not_a_500(client, bearer, run, path, param, value):
    url = path.format(agent=run.agent_id, run=run.pk, dataset=run.dataset_id)

    response = client.get(url, {param: value}, **bearer)

    assert response.status_code == 422, response.content[:300]
    assert param in response.content.decode()


@pytest.mark.parametrize("path", PAGED)
def test_the_bounds_leave_ordinary_paging_alone(client, bearer, run, path):
    url = path.format(agent=run.agent_id, run=run.pk, dataset=run.dataset_id)

    page = client.get(url, {"offset": 1_000_000, "limit": 1_000}, **bearer)

    assert page.status_code == 200 and page.json()["items"] == []
    assert client.get(url, {"limit": 1}, **bearer).json()["count"] == 1


def test_the_schema_states_the_bounds(client):
    operation = client.get("/api/openapi.json").json()["paths"]["/api/runs/{run_id}/results"]["get"]
    bounds = {p["name"]: p["schema"].get("maximum") for p in operation["parameters"] if p["in"] == "query"}
    assert bounds["offset"] == bounds["limit"] == 1_000_000_000


@pytest.mark.parametrize("page", ["461168601842738791", str(HUGE), "9" * 40])
def test_the_runs_list_clamps_a_huge_page(client_alice, run, page):
    response = client_alice.get(reverse("runs:list", args=[run.agent_id]), {"page": page})
    assert response.status_code == 200


@pytest.mark.parametrize("param", ["offset", "after", "upto"])
def test_the_result_list_falls_back_on_a_huge_offset(client_alice, run, param):
    url = reverse("runs:results", args=[run.agent_id, run.pk])
    response = client_alice.get(url, {param: str(HUGE)}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    page = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk]), {param: str(HUGE)})
    assert page.status_code == 200
