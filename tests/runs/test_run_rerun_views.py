"""Re-run failed and errored cases from the run page."""

import pytest
from django.urls import reverse

from agents.models import AgentVersion
from runs import services
from runs.models import Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(make_dataset, agent, alice, no_llm):
    """A finished real run of 4 cases: two fail (their expected answers are not in the knowledge)."""
    dataset = make_dataset(2, agent=agent)
    for n in range(2):
        dataset.cases.create(
            position=10 + n,
            question=f"What is the SLA credit? ({n})",
            expected_answer="The SLA credit is 10% per hour.",
        )
    return drive(services.run_start(agent=agent, dataset=dataset, user=alice))


def _url(run):
    return reverse("runs:rerun", args=[run.agent_id, run.pk])


def test_the_page_offers_a_rerun_of_the_failed_cases(client_alice, finished):
    body = client_alice.get(reverse("runs:detail", args=[finished.agent_id, finished.pk])).content.decode()
    assert finished.failed == 2
    assert "Re-run failed and errored cases" in body
    assert f'action="{_url(finished)}"' in body
    assert f'<option value="{finished.agent_version_id}">Version 1 (current)</option>' in body


def test_it_reruns_only_the_failed_cases_linked_to_the_parent(client_alice, finished, alice):
    response = client_alice.post(_url(finished), {"request_key": "k1"})
    child = Run.objects.exclude(pk=finished.pk).get()
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:detail", args=[finished.agent_id, child.pk])
    assert child.parent_id == finished.pk
    assert child.purpose == Run.Purpose.RERUN
    assert child.agent_version_id == finished.agent_version_id
    assert sorted(child.cases.values_list("question", flat=True)) == [
        "What is the SLA credit? (0)",
        "What is the SLA credit? (1)",
    ]
    assert child.created_by == alice
    page = client_alice.get(response["Location"]).content.decode()
    assert (
        f'of <a href="{reverse("runs:detail", args=[finished.agent_id, finished.pk])}">run #{finished.pk}</a>' in page
    )


def test_it_can_rerun_with_another_version(client_alice, finished, agent):
    newer = AgentVersion.objects.create(agent=agent, number=2, knowledge="The SLA credit is 10% per hour.")
    client_alice.post(_url(finished), {"version": newer.pk})
    child = Run.objects.exclude(pk=finished.pk).get()
    assert child.agent_version == newer


def test_the_same_request_key_starts_one_rerun(client_alice, finished):
    client_alice.post(_url(finished), {"request_key": "same"})
    client_alice.post(_url(finished), {"request_key": "same"})
    assert Run.objects.filter(parent=finished).count() == 1


def test_htmx_gets_a_client_redirect(client_bob, finished):
    response = client_bob.post(_url(finished), HTTP_HX_REQUEST="true")
    child = Run.objects.get(parent=finished)
    assert response["HX-Redirect"] == reverse("runs:detail", args=[finished.agent_id, child.pk])


def test_a_run_without_failures_cannot_be_rerun(client_alice, make_dataset, agent, alice, no_llm):
    clean = drive(services.run_start(agent=agent, dataset=make_dataset(2, agent=agent), user=alice))
    response = client_alice.post(_url(clean), follow=True)
    assert "no failed cases to re-run" in response.content.decode()
    htmx = client_alice.post(_url(clean), HTTP_HX_REQUEST="true")
    assert htmx.status_code == 422
    assert "no failed cases" in htmx["HX-Trigger"]


def test_a_version_of_another_agent_is_refused(client_alice, finished, team):
    from tests.factories import AgentFactory

    foreign = AgentFactory(team=team).current_version
    response = client_alice.post(_url(finished), {"version": foreign.pk}, follow=True)
    assert "Pick one of this agent" in response.content.decode()
    assert not Run.objects.filter(parent=finished).exists()


def test_it_only_accepts_post(client_alice, finished):
    assert client_alice.get(_url(finished)).status_code == 405


def test_outsiders_get_404_and_anonymous_visitors_log_in(client_charlie, client, finished):
    assert client_charlie.post(_url(finished)).status_code == 404
    assert client.post(_url(finished))["Location"].startswith(reverse("accounts:login"))
    assert not Run.objects.filter(parent=finished).exists()
