import pytest

from accounts.services import api_token_create
from runs.models import Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def auth(alice):
    _, raw = api_token_create(user=alice, name="ci")
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


@pytest.fixture
def dataset(make_dataset, agent, no_llm):
    return make_dataset(2, agent=agent)


def _start_url(dataset):
    return f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}/runs"


def test_post_starts_a_run(client, auth, dataset):
    response = client.post(_start_url(dataset), {}, content_type="application/json", **auth)
    assert response.status_code == 201
    body = response.json()
    run = Run.objects.get()
    assert body["id"] == run.pk
    assert body["status"] == "pending"
    assert body["total"] == 2
    assert body["scorer"] == "offline"
    assert body["agent_version"] == 1


def test_the_same_idempotency_key_returns_the_same_run(client, auth, dataset):
    first = client.post(_start_url(dataset), {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="ci-42", **auth)
    second = client.post(_start_url(dataset), {"request_key": "ci-42"}, content_type="application/json", **auth)
    assert first.json()["id"] == second.json()["id"]
    assert Run.objects.count() == 1


def test_a_dataset_that_cannot_run_is_a_400_with_the_reason(client, auth, dataset):
    dataset.cases.all().delete()
    response = client.post(_start_url(dataset), {}, content_type="application/json", **auth)
    assert response.status_code == 400
    assert response.json() == {"detail": "This dataset has no test cases yet. Add or generate some first."}


def test_get_returns_status_counters_and_results(client, auth, dataset, alice):
    run_id = client.post(_start_url(dataset), {}, content_type="application/json", **auth).json()["id"]
    drive(Run.objects.get(pk=run_id))

    body = client.get(f"/api/runs/{run_id}", **auth).json()

    assert body["status"] == "completed"
    assert (body["completed"], body["passed"], body["failed"], body["errored"]) == (2, 2, 0, 0)
    assert body["average_score"] == 10
    assert len(body["results"]) == 2
    result = body["results"][0]
    assert result["case_position"] == 1
    assert result["status"] == "pass"
    assert result["score"] == 10
    assert result["expected_answer"] == "Refunds are available within 30 days of purchase."
    assert result["reasoning"].startswith("Offline reference scorer")


def test_outsiders_get_404(client, dataset, charlie):
    _, raw = api_token_create(user=charlie, name="x")
    outsider = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert client.post(_start_url(dataset), {}, content_type="application/json", **outsider).status_code == 404
    assert not Run.objects.exists()


def test_another_teams_run_is_404(client, auth, make_dataset, charlie):
    from runs import services
    from tests.factories import AgentFactory

    foreign = make_dataset(1, agent=AgentFactory())  # a team alice is not in
    run = services.run_start(agent=foreign.agent, dataset=foreign, user=None)
    assert client.get(f"/api/runs/{run.pk}", **auth).status_code == 404


def test_a_token_is_required(client, dataset):
    assert client.post(_start_url(dataset), {}, content_type="application/json").status_code == 401


def test_an_llm_agent_without_a_model_is_a_422_with_the_reason(client, auth, make_dataset, agent, no_llm):
    from agents.models import Agent

    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    response = client.post(_start_url(dataset), {}, content_type="application/json", **auth)
    assert response.status_code == 422
    assert "no model" in response.json()["detail"]
    assert not Run.objects.exists()
