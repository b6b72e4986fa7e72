"""The runs API of the pages beyond start and read (runs/api_compare.py, runs/api_coverage.py):
the compare matrix, history, the baseline, rule coverage and its actions, the judge's preflight.
The pages' messages, team isolation, tokens and idempotency keys."""

import pytest
from django.urls import reverse

from accounts.services import api_token_create
from datasets.models import Dataset, RuleMap
from runs.models import DatasetBaseline, Run
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run
from tests.runs.test_run_compare_views import _matrix_runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=alice, name='ci')[1]}"}


@pytest.fixture
def outsider(charlie):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=charlie, name='x')[1]}"}


def _post(client, url, body, auth, **headers):
    return client.post(url, body, content_type="application/json", **auth, **headers)


# ---- the matrix and history ---------------------------------------------------------------------


def test_the_matrix_puts_regressions_first_as_the_compare_page(client, auth, agent):
    runs = _matrix_runs(agent, DatasetFactory(agent=agent))
    url = reverse("api:runs_compare", args=[agent.pk])

    body = client.get(url, {"runs": [run.pk for run in reversed(runs)]}, **auth).json()

    assert [column["run_id"] for column in body["columns"]] == [run.pk for run in runs]  # in the order made
    assert body["columns"][0]["test"] is None and body["columns"][1]["test"]["cases"] == 3
    assert [(row["question"], row["change"]) for row in body["rows"]] == [
        ("Refund window?", "regression"),
        ("SLA credit?", "fix"),
        ("Phone?", "moved"),
    ]
    assert [cell["status"] for cell in body["rows"][0]["cells"]] == ["pass", "pass", "fail", "pass", "fail"]


def test_the_matrix_answers_the_pages_messages(client, auth, agent):
    run = build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec()])
    other = build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec()])
    url = reverse("api:runs_compare", args=[agent.pk])

    one = client.get(url, {"runs": [run.pk]}, **auth)
    none = client.get(url, **auth)
    mixed = client.get(url, {"runs": [run.pk, other.pk]}, **auth)

    assert one.status_code == 400 and one.json()["detail"] == "Pick between 2 and 5 runs (you picked 1)."
    assert none.status_code == 400 and none.json()["detail"] == "This field is required."
    assert mixed.status_code == 400 and mixed.json()["detail"] == "Pick runs of the same dataset."


def test_another_teams_runs_are_not_in_the_matrix(client, auth, outsider, agent, other_team):
    runs = _matrix_runs(agent, DatasetFactory(agent=agent))[:2]
    url = reverse("api:runs_compare", args=[agent.pk])

    assert client.get(url, {"runs": [r.pk for r in runs]}, **outsider).status_code == 404
    assert client.get(url, {"runs": [r.pk for r in runs]}).status_code == 401
    theirs = build_run(agent=AgentFactory(team=other_team), cases=[CaseSpec()])
    refused = client.get(url, {"runs": [runs[0].pk, theirs.pk]}, **auth)
    assert refused.status_code == 400 and refused.json()["detail"] == "Pick runs of this agent."


def test_history_has_a_point_per_version_and_judge(client, auth, outsider, agent):
    runs = _matrix_runs(agent, DatasetFactory(agent=agent, name="Billing"))
    url = reverse("api:runs_history", args=[agent.pk])

    (billing,) = client.get(url, **auth).json()

    assert billing["name"] == "Billing" and billing["versions"] == [1, 2, 3, 4, 5]
    (series,) = billing["series"]
    assert [point["runs"] for point in series["points"]] == [[run.pk] for run in runs]
    assert series["points"][0]["pass_rate"] == pytest.approx(2 / 3)
    assert client.get(url, **outsider).status_code == 404
    assert client.get(url).status_code == 401


# ---- the baseline -------------------------------------------------------------------------------------


def test_pin_and_unpin_the_baseline(client, auth, alice, agent):
    dataset = DatasetFactory(agent=agent)
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    url = reverse("api:runs_baseline", args=[run.pk])

    pinned = _post(client, url, {}, auth)
    again = _post(client, url, {}, auth)

    assert pinned.status_code == again.status_code == 200
    assert pinned.json()["run_id"] == run.pk and pinned.json()["pinned_by"] == alice.username
    assert DatasetBaseline.objects.filter(dataset=dataset).count() == 1
    cleared = client.delete(url, **auth)
    assert cleared.status_code == 200 and cleared.json()["run_id"] is None
    assert not DatasetBaseline.objects.exists()


def test_an_unfinished_run_is_no_baseline(client, auth, agent, outsider):
    run = build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec()], status=Run.Status.STOPPED)
    url = reverse("api:runs_baseline", args=[run.pk])

    response = _post(client, url, {}, auth)

    assert response.status_code == 400
    assert response.json()["detail"] == "Only a completed run can be the baseline: it must have scored every case."
    assert _post(client, url, {}, outsider).status_code == 404
    assert client.delete(url, **outsider).status_code == 404
    assert _post(client, url, {}, {}).status_code == 401


# ---- coverage -------------------------------------------------------------------------------------


@pytest.fixture
def dataset(agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset, question="How long is the refund window?")
    return dataset


def _coverage(agent, dataset, name="page"):
    return reverse(f"api:coverage_{name}", args=[agent.pk, dataset.pk])


def test_the_coverage_lists_the_rules_and_their_cases(client, auth, agent, dataset):
    body = client.get(_coverage(agent, dataset), **auth).json()

    assert body["version"] == 1 and body["rules"] == len(body["rows"]) > 0
    assert body["covered"] == sum(1 for row in body["rows"] if row["covered"])
    assert body["rule_map"] is None and body["generating"] is False
    assert client.get(_coverage(agent, dataset), {"version": 7}, **auth).status_code == 404


def test_mapping_starts_one_job_per_key_and_says_when_there_is_no_model(
    client, auth, agent, dataset, fake_llm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks():
        first = _post(client, _coverage(agent, dataset, "map"), {}, auth, HTTP_IDEMPOTENCY_KEY="m1")
        second = _post(client, _coverage(agent, dataset, "map"), {}, auth, HTTP_IDEMPOTENCY_KEY="m1")
    assert first.status_code == 202 and second.status_code == 200
    assert first.json()["id"] == second.json()["id"] and RuleMap.objects.count() == 1
    assert first.json()["status"] == "queued"


def test_mapping_without_a_model_answers_the_pages_message(client, auth, agent, dataset, no_llm):
    response = _post(client, _coverage(agent, dataset, "map"), {}, auth)

    assert response.status_code == 400
    assert response.json()["detail"].startswith("Mapping with AI needs a model")
    assert not RuleMap.objects.exists()


def test_adopting_a_map_that_is_not_done_is_refused(client, auth, agent, dataset):
    rule_map = RuleMap.objects.create(dataset=dataset, version=agent.current_version, status=RuleMap.Status.RUNNING)

    response = _post(client, _coverage(agent, dataset, "adopt"), {"map": rule_map.pk}, auth)
    unknown = _post(client, _coverage(agent, dataset, "adopt"), {"map": rule_map.pk + 1}, auth)

    assert response.status_code == 400 and response.json()["detail"] == "Only a finished map can be used."
    assert unknown.status_code == 404
    none = _post(client, _coverage(agent, dataset, "adopt"), {}, auth)
    assert none.status_code == 409 and none.json()["detail"] == "There is no proposed map of this version to use."
    RuleMap.objects.filter(pk=rule_map.pk).update(status=RuleMap.Status.DONE, adopted=False)
    adopted = _post(client, _coverage(agent, dataset, "adopt"), {}, auth)  # the latest proposal
    assert adopted.status_code == 200 and adopted.json() | {"id": rule_map.pk, "adopted": True} == adopted.json()


def test_generating_for_uncovered_rules_starts_once_per_key(
    client, auth, agent, dataset, fake_llm, django_capture_on_commit_callbacks
):
    url = _coverage(agent, dataset, "generate")
    with django_capture_on_commit_callbacks():
        first = _post(client, url, {"count": 2}, auth, HTTP_IDEMPOTENCY_KEY="g1")
        second = _post(client, url, {"count": 2}, auth, HTTP_IDEMPOTENCY_KEY="g1")

    assert first.status_code == 202, first.json()
    assert first.json()["status"] == "extracting" and first.json()["message"].startswith("Writing 2 test case(s)")
    assert second.status_code == 200  # the replay: no second generation
    dataset.refresh_from_db()
    assert dataset.generation["more"]["count"] == 2
    refused = _post(client, url, {"count": 2}, auth)  # a new key while it still writes
    assert refused.status_code == 400
    assert refused.json()["detail"] == "Cases can be generated into a Ready dataset only. Wait until it is Ready."


def test_generating_a_count_out_of_range_answers_the_pages_message(client, auth, agent, dataset, fake_llm):
    response = _post(client, _coverage(agent, dataset, "generate"), {"count": 0}, auth)

    assert response.status_code == 400 and response.json()["detail"].startswith("Choose from 1 to")
    assert Dataset.objects.get(pk=dataset.pk).status == Dataset.Status.READY


@pytest.mark.parametrize(("name", "body"), [("map", {}), ("adopt", {"map": 1}), ("generate", {"count": 1})])
def test_another_teams_coverage_is_404(client, outsider, agent, dataset, name, body):
    assert _post(client, _coverage(agent, dataset, name), body, outsider).status_code == 404
    assert _post(client, _coverage(agent, dataset, name), body, {}).status_code == 401
    assert client.get(_coverage(agent, dataset), **outsider).status_code == 404


# ---- the judge's preflight ---------------------------------------------------------------------------


def test_the_console_judge_preflight_offline_is_not_started(client, auth, no_llm):
    read = client.get(reverse("api:judge_preflight_panel"), **auth)
    started = _post(client, reverse("api:judge_preflight_start"), {}, auth)

    assert read.status_code == 200 and read.json()["state"] == "offline"
    assert started.status_code == 202 and started.json()["state"] == "offline"
    assert client.get(reverse("api:judge_preflight_panel")).status_code == 401


def test_the_console_judge_preflight_starts_once(client, auth, fake_llm, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        first = _post(client, reverse("api:judge_preflight_start"), {}, auth)
        second = _post(client, reverse("api:judge_preflight_start"), {}, auth)

    assert first.json()["state"] == second.json()["state"] == "running"


def test_a_datasets_judge_preflight_state(client, auth, outsider, agent, dataset, no_llm):
    url = reverse("api:runs_start_preflight", args=[agent.pk, dataset.pk])

    assert client.get(url, **auth).json()["state"] == "offline"
    assert client.get(url, **outsider).status_code == 404
