"""Apply's preview with a model: before anything is saved, the changed agent answers the cases
its new text reaches, scored by the run's judge, as a worker job (suggestions/preview.py)."""

import pytest
from django.urls import reverse
from django_htmx.http import HTMX_STOP_POLLING

from agents.models import Agent
from runs.models import Result, Run, RunCase
from suggestions.models import PreviewJob
from tests.factories import AgentFactory
from tests.suggestions.conftest import edit_post, suggestion

HTMX = {"HX-Request": "true"}
PHONE_FACT = "Phone support: +1 555 0100."


@pytest.fixture
def llm_run(team):
    """A judged run of an LLM agent: case 1 passed, case 2 (the phone number) failed."""
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM)
    run = Run.objects.create(
        agent=agent, agent_version=agent.current_version, dataset_name="Support policy", status=Run.Status.COMPLETED,
        scoring={"pass_threshold": 7}, total=2, completed=2, passed=1, failed=1, average_score=5.0,
        scorer=Run.Scorer.LLM,
    )  # fmt: skip
    cases = [
        ("When is support open?", "Support is open 9-17 CET on weekdays.", "pass"),
        ("What is the support phone number?", "Call +1 555 0100.", "fail"),
    ]
    for position, (question, expected, status) in enumerate(cases):
        case = RunCase.objects.create(run=run, position=position, question=question, expected_answer=expected)
        Result.objects.create(run=run, case=case, status=status, score=9 if status == "pass" else 2)
    item = suggestion(run, 0, title="Add the phone number", proposed_text=PHONE_FACT)
    item.cases.set([run.cases.get(position=1)])
    return run


def _review_post(client, run):
    url = reverse("suggestions:apply", args=[run.agent_id, run.pk])
    return client.post(url, edit_post(list(run.suggestions.all())), headers=HTMX)


def _preview_data(run):
    return {
        "suggestions": [s.pk for s in run.suggestions.all()],
        "base_version": run.agent.current_version_id,
        "fields_changed": ["knowledge"],
        "knowledge": f"{run.agent.current_version.knowledge}\n\n{PHONE_FACT}",
    }


@pytest.mark.django_db
def test_the_review_offers_a_preview_only_with_a_model(client_alice, llm_run, no_llm):
    assert "Preview the affected cases with the model" not in _review_post(client_alice, llm_run).content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_preview_answers_the_reached_cases_with_the_changed_agent_and_saves_nothing(
    client_alice, llm_run, fake_llm, tasks_run_here, django_capture_on_commit_callbacks
):
    fake_llm.add_rule(task="agent", reply="Call +1 555 0100, 9-17 CET on weekdays.")
    fake_llm.add_rule(task="judge", contains="When is support open", json={"score": 4, "reasoning": "Lost hours."})
    fake_llm.add_rule(task="judge", json={"score": 9, "reasoning": "Right number."})
    url = reverse("suggestions:apply_preview", args=[llm_run.agent_id, llm_run.pk])

    with django_capture_on_commit_callbacks(execute=True):
        started = client_alice.post(url, _preview_data(llm_run), headers=HTMX)

    assert started.status_code == 200
    job = PreviewJob.objects.get(run=llm_run)
    assert job.status == PreviewJob.Status.DONE and job.positions == [0, 1]  # the other case first
    assert [task for task, _args, _kwargs in tasks_run_here] == ["suggestions.tasks.preview_execute"]
    # The agent was asked with the new knowledge in its prompt; the version was never saved.
    agent_calls = [request for request in fake_llm.requests if request.task == "agent"]
    assert len(agent_calls) == 2 and all(PHONE_FACT in str(call.messages) for call in agent_calls)
    assert llm_run.agent.versions.count() == 1

    poll = client_alice.get(reverse("suggestions:apply_preview_job", args=[llm_run.agent_id, llm_run.pk, job.pk]),
                            headers=HTMX)  # fmt: skip
    page = " ".join(poll.content.decode().split())
    assert poll.status_code == HTMX_STOP_POLLING and "hx-trigger" not in page
    assert "2 cases answered by the changed agent, scored by this run's judge: 1 would pass that failed, " in page
    assert "1 would fail that passed" in page
    assert "#1</strong> “When is support open?”" in page and "<strong>was pass</strong>" in page


@pytest.mark.django_db
def test_a_running_preview_polls_and_an_outsider_gets_404(client_alice, charlie, llm_run, fake_llm):
    url = reverse("suggestions:apply_preview", args=[llm_run.agent_id, llm_run.pk])
    client_alice.post(url, _preview_data(llm_run), headers=HTMX)  # no commit in this test: the job stays queued
    job = PreviewJob.objects.get(run=llm_run)
    job_url = reverse("suggestions:apply_preview_job", args=[llm_run.agent_id, llm_run.pk, job.pk])

    poll = client_alice.get(job_url, headers=HTMX)

    # Its own target: the review form around it targets the whole dialog.
    assert poll.status_code == 200 and 'hx-trigger="every 3s" hx-target="this"' in poll.content.decode()
    assert "0 of 2 cases answered" in poll.content.decode()
    client_alice.force_login(charlie)
    assert client_alice.get(job_url, headers=HTMX).status_code == 404
    assert client_alice.post(job_url).status_code == 405


@pytest.mark.django_db
def test_a_preview_with_nothing_changed_says_so(client_alice, llm_run, fake_llm):
    data = {**_preview_data(llm_run), "knowledge": llm_run.agent.current_version.knowledge}

    response = client_alice.post(reverse("suggestions:apply_preview", args=[llm_run.agent_id, llm_run.pk]), data)

    assert "No case of this run would answer differently: there is nothing to preview." in response.content.decode()
    assert not PreviewJob.objects.exists()
