"""The run API beyond start and read: list, status, results pages, stop, re-run, compare, exports.

Every endpoint answers 404 to another team's token, and numbering is 1-based everywhere
(case positions, repeats), as the run page shows it.
"""

import csv
import io
import json

import pytest

from accounts.services import api_token_create
from runs import services
from runs.models import Result, Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def auth(alice):
    _, raw = api_token_create(user=alice, name="ci")
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


@pytest.fixture
def outsider(charlie):
    _, raw = api_token_create(user=charlie, name="x")
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


@pytest.fixture
def dataset(make_dataset, no_llm):
    return make_dataset(3)


def _start(dataset, **kwargs):
    return services.run_start(agent=dataset.agent, dataset=dataset, user=None, **kwargs)


def _fail_case(run, position):
    """Make one case of a finished run a failure (the offline scorer passes the factory's cases)."""
    Result.objects.filter(run=run, case__position=position).update(status=Result.Status.FAIL, score=2)


# ---- list ------------------------------------------------------------------------------


def test_list_runs_filters_on_dataset_status_and_version(client, auth, dataset, make_dataset):
    agent = dataset.agent
    other = make_dataset(1, agent=agent)
    done = drive(_start(dataset))
    pending = _start(other)
    url = f"/api/agents/{agent.pk}/runs"

    everything = client.get(url, **auth).json()
    assert everything["count"] == 2
    assert [item["id"] for item in everything["items"]] == [pending.pk, done.pk]  # newest first

    by_dataset = client.get(url, {"dataset": other.pk}, **auth).json()
    assert [item["id"] for item in by_dataset["items"]] == [pending.pk]
    by_status = client.get(url, {"status": "completed"}, **auth).json()
    assert [item["id"] for item in by_status["items"]] == [done.pk]
    assert client.get(url, {"version": 1}, **auth).json()["count"] == 2
    assert client.get(url, {"version": 2}, **auth).json()["count"] == 0


def test_list_runs_refuses_an_unknown_status(client, auth, dataset):
    response = client.get(f"/api/agents/{dataset.agent_id}/runs", {"status": "done"}, **auth)
    assert response.status_code == 422


# ---- detail, results pages and the poller's status ---------------------------------------


def test_run_detail_pages_its_results(client, auth, make_dataset, no_llm):
    dataset = make_dataset(5)
    run = drive(_start(dataset))

    first = client.get(f"/api/runs/{run.pk}", {"limit": 2}, **auth).json()
    assert first["results_count"] == 5
    assert [r["case_position"] for r in first["results"]] == [1, 2]
    assert first["results_next"].endswith(f"/api/runs/{run.pk}/results?offset=2&limit=2")

    rest = client.get(f"/api/runs/{run.pk}/results", {"offset": 2, "limit": 10}, **auth).json()
    assert rest["count"] == 5
    assert [r["case_position"] for r in rest["items"]] == [3, 4, 5]


def test_run_detail_returns_at_most_100_results_by_default(client, auth, make_dataset, no_llm):
    dataset = make_dataset(1, dataset={"number_of_requests": 3})
    run = _start(dataset)
    body = client.get(f"/api/runs/{run.pk}", **auth).json()
    assert body["results_count"] == 3
    assert len(body["results"]) == 3
    assert body["results_next"] is None
    assert client.get(f"/api/runs/{run.pk}", {"limit": 501}, **auth).status_code == 422


def test_repeats_are_numbered_from_1(client, auth, make_dataset, no_llm):
    dataset = make_dataset(1, dataset={"number_of_requests": 2})
    run = drive(_start(dataset))
    results = client.get(f"/api/runs/{run.pk}", **auth).json()["results"]
    assert [(r["case_position"], r["repeat"]) for r in results] == [(1, 1), (1, 2)]


def test_status_endpoint_is_small_and_cheap(client, auth, dataset, django_assert_max_num_queries):
    run = _start(dataset)
    with django_assert_max_num_queries(3):
        response = client.get(f"/api/runs/{run.pk}/status", **auth)
    body = response.json()
    assert set(body) == {
        "id",
        "status",
        "finished",
        "error",
        "total",
        "completed",
        "passed",
        "failed",
        "errored",
        "abstained",
        "judge_failed_preflight",
        "average_score",
    }
    assert body["status"] == "pending" and body["finished"] is False and body["total"] == 3
    drive(run)
    body = client.get(f"/api/runs/{run.pk}/status", **auth).json()
    assert body["finished"] is True and body["completed"] == 3 and body["average_score"] == 10


# ---- stop and re-run -------------------------------------------------------------------


def test_stop_a_run(client, auth, dataset):
    run = _start(dataset)
    response = client.post(f"/api/runs/{run.pk}/stop", **auth)
    assert response.status_code == 200
    assert response.json()["status"] == "stopped"
    again = client.post(f"/api/runs/{run.pk}/stop", **auth)
    assert again.status_code == 409
    assert again.json() == {"detail": "This run has already finished."}


def test_rerun_failed_cases_keeps_the_case_numbers_and_is_idempotent(client, auth, dataset):
    run = drive(_start(dataset))
    _fail_case(run, 2)

    first = client.post(
        f"/api/runs/{run.pk}/rerun", {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1", **auth
    )
    assert first.status_code == 201
    child = Run.objects.get(parent=run)
    assert first.json()["id"] == child.pk
    assert first.json()["total"] == 1

    replay = client.post(
        f"/api/runs/{run.pk}/rerun", {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1", **auth
    )
    assert replay.status_code == 200
    assert replay.json()["id"] == child.pk
    assert Run.objects.filter(parent=run).count() == 1


def test_rerun_without_failures_is_a_400_with_the_reason(client, auth, dataset):
    run = drive(_start(dataset))
    response = client.post(f"/api/runs/{run.pk}/rerun", {}, content_type="application/json", **auth)
    assert response.status_code == 400
    assert response.json() == {"detail": "This run has no failed cases to re-run."}


def test_rerun_with_another_version(client, auth, dataset):
    from agents.services import agent_update

    run = drive(_start(dataset))
    _fail_case(run, 0)
    agent = agent_update(agent=dataset.agent, user=None, instructions="Be brief.")
    version = agent.current_version
    response = client.post(
        f"/api/runs/{run.pk}/rerun", {"version": version.number}, content_type="application/json", **auth
    )
    assert response.status_code == 201
    assert response.json()["agent_version"] == version.number
    missing = client.post(f"/api/runs/{run.pk}/rerun", {"version": 99}, content_type="application/json", **auth)
    assert missing.status_code == 422


# ---- compare -----------------------------------------------------------------------------


def test_compare_two_runs(client, auth, dataset):
    before = drive(_start(dataset))
    after = drive(_start(dataset))
    _fail_case(after, 1)

    response = client.get(f"/api/runs/{after.pk}/compare/{before.pk}", **auth)

    assert response.status_code == 200
    body = response.json()
    assert body["a"]["id"] == before.pk and body["b"]["id"] == after.pk
    assert body["comparable"] is True
    assert body["totals_a"]["passed"] == 3 and body["totals_b"]["passed"] == 2
    assert [row["a"]["number"] for row in body["regressions"]] == [2]
    assert body["regressions"][0]["change"] == "regression"
    assert len(body["rows"]) == 3
    test = body["test"]
    assert (test["cases"], test["fixes"], test["breaks"]) == (3, 0, 1)
    assert test["p_value"] == 1.0 and test["significant"] is False and test["alpha"] == 0.05
    assert test["sentence"].endswith("not distinguishable from noise with 3 cases (p = 1).")
    assert len(test["interval"]) == 2 and test["mean_difference"] is not None
    assert body["judges_differ"] is None


def test_compare_refuses_the_same_run_and_other_datasets(client, auth, dataset, make_dataset):
    run = _start(dataset)
    other = _start(make_dataset(1, agent=dataset.agent))
    same = client.get(f"/api/runs/{run.pk}/compare/{run.pk}", **auth)
    assert same.status_code == 400
    assert same.json() == {"detail": "Pick two different runs."}
    assert client.get(f"/api/runs/{run.pk}/compare/{other.pk}", **auth).status_code == 400


# ---- exports -------------------------------------------------------------------------------


def test_download_each_export(client, auth, dataset):
    run = drive(_start(dataset))
    expected = {
        "json": "application/json",
        "csv": "text/csv; charset=utf-8",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "html": "text/html; charset=utf-8",
    }
    for fmt, content_type in expected.items():
        response = client.get(f"/api/runs/{run.pk}/export/{fmt}", **auth)
        assert response.status_code == 200, fmt
        assert response["Content-Type"] == content_type
        assert f"evalsite-run-{run.pk}-" in response["Content-Disposition"]
    assert client.get(f"/api/runs/{run.pk}/export/pdf", **auth).status_code == 404


def test_exports_number_cases_and_repeats_from_1(client, auth, make_dataset, no_llm):
    run = drive(_start(make_dataset(1, dataset={"number_of_requests": 2})))
    data = json.loads(client.get(f"/api/runs/{run.pk}/export/json", **auth).content)
    assert [(r["case"]["position"], r["repeat"]) for r in data["results"]] == [(1, 1), (1, 2)]
    text = client.get(f"/api/runs/{run.pk}/export/csv", **auth).content.decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(row["case_number"], row["repeat"]) for row in rows] == [("1", "1"), ("1", "2")]


# ---- request bodies and idempotent start -----------------------------------------------------


def test_unknown_fields_in_a_start_body_are_a_422(client, auth, dataset):
    url = f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}/runs"
    response = client.post(url, {"version": 1}, content_type="application/json", **auth)
    assert response.status_code == 422
    assert "version" in json.dumps(response.json())
    assert not Run.objects.exists()


def test_an_idempotent_replay_answers_200_with_the_original_run(client, auth, dataset):
    url = f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}/runs"
    first = client.post(url, {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="ci-7", **auth)
    replay = client.post(url, {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="ci-7", **auth)
    assert (first.status_code, replay.status_code) == (201, 200)
    assert replay.json()["id"] == first.json()["id"]


# ---- team isolation --------------------------------------------------------------------------


def test_another_teams_token_gets_404_on_every_run_endpoint(client, outsider, dataset):
    run = drive(_start(dataset))
    _fail_case(run, 0)
    other = drive(_start(dataset))
    gets = [
        f"/api/agents/{dataset.agent_id}/runs",
        f"/api/runs/{run.pk}/status",
        f"/api/runs/{run.pk}/results",
        f"/api/runs/{run.pk}/compare/{other.pk}",
        *[f"/api/runs/{run.pk}/export/{fmt}" for fmt in ("json", "csv", "xlsx", "html")],
    ]
    for url in gets:
        assert client.get(url, **outsider).status_code == 404, url
    for url in (f"/api/runs/{run.pk}/stop", f"/api/runs/{run.pk}/rerun"):
        assert client.post(url, {}, content_type="application/json", **outsider).status_code == 404, url
    assert Run.objects.count() == 2


def test_the_schema_documents_the_run_endpoints_and_stays_valid(client):
    from openapi_spec_validator import validate

    schema = client.get("/api/openapi.json").json()
    validate(schema)
    paths = schema["paths"]
    assert "get" in paths["/api/agents/{agent_id}/runs"]
    for path in ("/status", "/results", "/compare/{baseline_id}", "/export/json", "/export/xlsx"):
        assert "get" in paths["/api/runs/{run_id}" + path], path
    for path in ("/stop", "/rerun"):
        assert "post" in paths["/api/runs/{run_id}" + path], path
    start = paths["/api/agents/{agent_id}/eval/datasets/{dataset_id}/runs"]["post"]
    assert {"200", "201"} <= set(start["responses"])
