"""Re-scoring (issue 18, section 6): a finished run's answers judged again as a new linked run,
through the ordinary window, with no agent call: the fake server sees only judge requests."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from accounts.services import api_token_create
from agents.models import Agent
from datasets import services as dataset_services
from runs import services
from runs.judging import configs as judging
from runs.models import Result, Run
from suggestions.models import SuggestionGeneration
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(make_dataset, alice, fake_llm):
    dataset = make_dataset(2, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="agent", reply="Refunds within 30 days.")
    return drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))


def _calls(fake_llm, run):
    return [r.task for r in fake_llm.requests if r.trace.get("run") == str(run.pk)]


def test_a_rescore_judges_the_stored_answers_again_without_asking_the_agent(finished, alice, fake_llm):
    assert _calls(fake_llm, finished).count("agent") == 2
    dataset_services.dataset_update_settings(dataset=finished.dataset, acceptance_criteria="Names the 30 days.")
    fake_llm.add_rule(task="judge", contains="Names the 30 days.", json={"score": 3, "reasoning": "Stricter."})

    child = drive(services.run_rescore(run=finished, user=alice))

    assert _calls(fake_llm, child) == ["judge", "judge"]  # no agent, paraphrase or summary call
    assert (child.purpose, child.parent, child.agent_version) == (Run.Purpose.RESCORE, finished, finished.agent_version)
    assert child.status == Run.Status.COMPLETED and (child.passed, child.failed) == (0, 2)
    assert child.agent_tokens == 0 and child.judge_tokens > 0
    assert child.judge_config != finished.judge_config
    assert child.judge_config.criteria["acceptance_criteria"] == "Names the 30 days."
    originals = {r.pk: r for r in Result.objects.filter(run=finished)}
    for result in Result.objects.filter(run=child):
        source = originals[result.rescored_from_id]
        assert (result.actual_answer, result.question, result.repeat) == (
            source.actual_answer,
            source.question,
            source.repeat,
        )
        assert (source.score, result.score) == (8, 3)
    assert "judged the answers of run" in child.summary_note
    assert not SuggestionGeneration.objects.filter(run=child).exists()  # 2 failures, yet no agent to fix
    assert judging.judges_differ(finished, child) is not None


def test_a_rescore_whose_worker_died_is_requeued_by_the_reaper_and_judged_once(finished, alice, fake_llm, settings):
    child = services.run_rescore(run=finished, user=alice)
    dead = Result.objects.filter(run=child, status=Result.Status.QUEUED).order_by("id").first()
    old = timezone.now() - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS + 1)
    Result.objects.filter(pk=dead.pk).update(status=Result.Status.RUNNING, claimed_at=old, attempts=1)

    assert services.run_reap() == 1
    services.run_execute_case(result_id=dead.pk, token=dead.token)  # the dead worker's message: stale
    child = drive(child)

    assert (child.status, child.completed) == (Run.Status.COMPLETED, 2)
    assert Result.objects.filter(run=child).count() == 2
    assert _calls(fake_llm, child) == ["judge", "judge"]


def test_a_rescore_can_use_a_chosen_judge_configuration(finished, alice, fake_llm):
    original = finished.judge_config
    dataset_services.dataset_update_settings(dataset=finished.dataset, pass_threshold=9)

    child = drive(services.run_rescore(run=finished, user=alice, judge_config=original))

    assert child.judge_config == original
    assert child.scoring["pass_threshold"] == 7
    assert judging.judges_differ(finished, child) is None


def test_the_same_request_key_makes_one_rescore(finished, alice):
    first = services.run_rescore(run=finished, user=alice, request_key="again")
    assert services.run_rescore(run=finished, user=alice, request_key="again").pk == first.pk


def test_an_active_run_cannot_be_rescored(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    with pytest.raises(ValidationError, match="Wait for the run to finish"):
        services.run_rescore(run=run, user=alice)


def test_results_without_an_answer_are_not_rescored(finished, alice, fake_llm):
    Result.objects.filter(run=finished).update(status=Result.Status.ERROR, actual_answer="", error="Agent timed out")
    with pytest.raises(ValidationError, match="no answers to judge again"):
        services.run_rescore(run=finished, user=alice)

    first = Result.objects.filter(run=finished).order_by("id").first()
    Result.objects.filter(pk=first.pk).update(status=Result.Status.PASS, actual_answer="Thirty days.")
    child = drive(services.run_rescore(run=finished, user=alice))

    statuses = sorted(Result.objects.filter(run=child).values_list("status", flat=True))
    assert statuses == ["pass", "skipped"]
    skipped = Result.objects.get(run=child, status=Result.Status.SKIPPED)
    assert "the agent gave no answer" in skipped.error and "Agent timed out" in skipped.error
    assert _calls(fake_llm, child) == ["judge"]


def test_a_configuration_of_another_dataset_is_refused(finished, alice, make_dataset, fake_llm):
    other = drive(services.run_start(agent=finished.agent, dataset=make_dataset(1, agent=finished.agent), user=alice))
    with pytest.raises(ValidationError, match="of this run's dataset"):
        services.run_rescore(run=finished, user=alice, judge_config=other.judge_config)


# ---- the page ------------------------------------------------------------------------------------


def test_the_run_page_offers_rescore_once_the_run_is_over(finished, client_alice):
    page = client_alice.get(reverse("runs:detail", args=[finished.agent_id, finished.pk])).content.decode()

    assert 'id="run-rescore-button"' in page
    assert reverse("runs:rescore", args=[finished.agent_id, finished.pk]) in page
    assert f"{finished.judge_config.label} (this run&#x27;s judge)" in page


def test_posting_rescore_starts_it_and_opens_the_new_run(finished, client_alice, fake_llm):
    url = reverse("runs:rescore", args=[finished.agent_id, finished.pk])

    response = client_alice.post(url, {"request_key": "k1"})

    child = Run.objects.get(purpose=Run.Purpose.RESCORE)
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:detail", args=[finished.agent_id, child.pk])
    htmx = client_alice.post(
        url, {"request_key": "k2", "judge_config": finished.judge_config.number}, HTTP_HX_REQUEST="true"
    )
    assert htmx.status_code == 200 and htmx["HX-Redirect"]
    assert Run.objects.filter(purpose=Run.Purpose.RESCORE).last().judge_config == finished.judge_config
    page = client_alice.get(response["Location"]).content.decode()
    assert f'Re-score of <a href="{reverse("runs:detail", args=[finished.agent_id, finished.pk])}"' in page


def test_a_bad_choice_is_refused_where_the_user_is(finished, client_alice):
    url = reverse("runs:rescore", args=[finished.agent_id, finished.pk])

    response = client_alice.post(url, {"judge_config": "99"}, follow=True)

    assert "Pick a judge configuration of this run" in response.content.decode()
    assert not Run.objects.filter(purpose=Run.Purpose.RESCORE).exists()


def test_rescore_is_post_only_and_hidden_from_other_teams(finished, client_alice, client_charlie):
    url = reverse("runs:rescore", args=[finished.agent_id, finished.pk])
    assert client_alice.get(url).status_code == 405
    assert client_charlie.post(url, {}).status_code == 404
    assert not Run.objects.filter(purpose=Run.Purpose.RESCORE).exists()


# ---- the API ---------------------------------------------------------------------------------------


def _bearer(user):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=user, name='ci')[1]}"}


def test_the_api_starts_a_rescore(finished, client, alice):
    url = f"/api/runs/{finished.pk}/rescore"

    created = client.post(url, {"request_key": "ci-1"}, content_type="application/json", **_bearer(alice))
    replayed = client.post(url, {"request_key": "ci-1"}, content_type="application/json", **_bearer(alice))

    assert created.status_code == 201
    body = created.json()
    assert (body["purpose"], body["parent_id"]) == ("rescore", finished.pk)
    assert body["judge"]["label"].startswith("judge v")
    assert replayed.status_code == 200 and replayed.json()["id"] == body["id"]


def test_the_api_takes_a_configuration_by_number(finished, client, alice):
    url = f"/api/runs/{finished.pk}/rescore"
    number = finished.judge_config.number

    chosen = client.post(url, {"judge_config": number}, content_type="application/json", **_bearer(alice))
    unknown = client.post(url, {"judge_config": 42}, content_type="application/json", **_bearer(alice))

    assert chosen.status_code == 201 and chosen.json()["judge"]["id"] == finished.judge_config.pk
    assert unknown.status_code == 422 and "no judge configuration v42" in unknown.content.decode()


def test_the_api_hides_the_run_from_other_teams(finished, client, charlie):
    response = client.post(f"/api/runs/{finished.pk}/rescore", {}, content_type="application/json", **_bearer(charlie))
    assert response.status_code == 404
    assert not Run.objects.filter(purpose=Run.Purpose.RESCORE).exists()


def test_the_api_results_carry_the_samples_and_the_link_to_the_source(finished, client, alice, fake_llm):
    child = drive(services.run_rescore(run=finished, user=alice))

    results = client.get(f"/api/runs/{child.pk}/results", **_bearer(alice)).json()["items"]

    source_ids = set(Result.objects.filter(run=finished).values_list("pk", flat=True))
    assert {item["rescored_from_id"] for item in results} == source_ids
    assert all(item["judge_samples"] == [] and item["judge_stable"] is None for item in results)


def test_the_api_lists_a_datasets_judges_newest_first(finished, client, alice, charlie):
    dataset_services.dataset_update_settings(dataset=finished.dataset, pass_threshold=8)
    url = f"/api/agents/{finished.agent_id}/eval/datasets/{finished.dataset_id}/judges"

    judges = client.get(url, **_bearer(alice)).json()

    assert [(j["number"], j["threshold"]) for j in judges] == [(2, 8), (1, 7)]
    assert judges[1]["label"] == finished.judge_config.label and len(judges[1]["fingerprint"]) == 64
    assert client.get(url, **_bearer(charlie)).status_code == 404


def test_the_schema_documents_rescore(client):
    operation = client.get("/api/openapi.json").json()["paths"]["/api/runs/{run_id}/rescore"]["post"]
    assert {"200", "201", "400"} <= set(operation["responses"])
    assert "without asking the agent" in operation["summary"]


# ---- the judge asked for is the judge used (issue 34, item 1) ---------------------------------------


@pytest.fixture
def scored_offline(make_dataset, alice, fake_llm, settings):
    """A run scored by the offline reference scorer (v1), then a judge model configured (v2)."""
    settings.EVALSITE_JUDGE_MODEL = ""
    settings.EVALSITE_LLM_MODEL = ""
    dataset = make_dataset(2, kind=Agent.Kind.HTTP)
    run = Run.objects.create(
        agent=dataset.agent,
        agent_version=dataset.agent.current_version,
        dataset=dataset,
        dataset_name=dataset.name,
        scoring=judging.dataset_scoring(dataset),
        judge_config=judging.dataset_judge_config(dataset=dataset),
        scorer=Run.Scorer.OFFLINE,
        status=Run.Status.COMPLETED,
        total=1,
        completed=1,
        passed=1,
    )
    case = run.cases.create(position=0, number=1, question="How long?", expected_answer="30 days.")
    Result.objects.create(run=run, case=case, status=Result.Status.PASS, actual_answer="30 days.", score=10)
    from tests.fakellm import point_settings_at

    point_settings_at(settings, fake_llm)
    return run


def test_a_rescore_with_the_offline_judge_it_was_asked_for_is_scored_offline(
    scored_offline, alice, fake_llm, client_alice
):
    offline = scored_offline.judge_config
    assert offline.judge_model == "" and judging.dataset_judge_config(dataset=scored_offline.dataset) != offline

    child = drive(services.run_rescore(run=scored_offline, user=alice, judge_config=offline))

    assert child.judge_config == offline
    assert (child.scorer, child.judge_model) == (Run.Scorer.OFFLINE, "")
    assert _calls(fake_llm, child) == []  # the offline scorer asks no model
    page = client_alice.get(reverse("runs:detail", args=[child.agent_id, child.pk])).content.decode()
    # The judge by its name, its fingerprint in the tooltip.
    lineage = page.split('class="run-lineage small"')[1].split("</p>")[0]
    assert f'<span class="chip chip-judge" title="Judge fingerprint {offline.short_fingerprint}:' in lineage
    assert f">{offline.label}</span>" in lineage
    assert judging.judges_differ(scored_offline, child) is None


def test_the_api_rescore_records_the_configuration_it_was_given(scored_offline, client, alice):
    number = scored_offline.judge_config.number

    response = client.post(
        f"/api/runs/{scored_offline.pk}/rescore",
        {"judge_config": number},
        content_type="application/json",
        **_bearer(alice),
    )

    assert response.status_code == 201
    judge = response.json()["judge"]
    assert (judge["id"], judge["fingerprint"]) == (
        scored_offline.judge_config.pk,
        scored_offline.judge_config.fingerprint,
    )


def test_the_rescore_dialog_names_judges_by_fingerprint(scored_offline, client_alice):
    page = client_alice.get(reverse("runs:detail", args=[scored_offline.agent_id, scored_offline.pk])).content.decode()

    assert scored_offline.judge_config.short_fingerprint in page.split('id="rescore-dialog"')[1].split("</dialog>")[0]
