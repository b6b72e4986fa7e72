"""The dataset page (datasets:detail): header, Run Evaluation, settings, cases."""

import pytest
from django.urls import reverse

from datasets.models import Dataset
from tests.factories import DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


def _url(dataset) -> str:
    return reverse("datasets:detail", args=[dataset.agent_id, dataset.pk])


@pytest.mark.django_db
def test_page_shows_the_name_settings_and_cases(client_alice, agent):
    dataset = DatasetFactory(agent=agent, name="Refund questions", pass_threshold=8)
    TestCaseFactory(dataset=dataset, question="How long is the refund window?", tags=["refunds"])

    response = client_alice.get(_url(dataset))

    html = response.content.decode()
    assert response.status_code == 200
    assert '<h2 class="dataset-title">Refund questions</h2>' in html
    assert "Run Evaluation" in html
    assert "Scoring settings" in html and "Pass at 8/10" in html
    assert "How long is the refund window?" in html
    assert "#refunds" in html
    assert 'id="case-search"' in html


@pytest.mark.django_db
def test_run_button_is_disabled_with_a_reason_when_there_are_no_cases(client_alice, agent):
    dataset = DatasetFactory(agent=agent)

    html = client_alice.get(_url(dataset)).content.decode()

    assert 'disabled aria-describedby="run-blocker"' in html
    assert "Add at least one test case to run an evaluation." in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (Dataset.Status.EXTRACTING, "Test cases are still being extracted."),
        (Dataset.Status.FAILED, "This dataset failed to build, so it cannot be run."),
    ],
)
def test_an_extracting_or_failed_dataset_cannot_be_run(client_alice, agent, status, reason):
    dataset = DatasetFactory(agent=agent, status=status, failure_reason="The PDF is encrypted.")
    TestCaseFactory(dataset=dataset)

    html = client_alice.get(_url(dataset)).content.decode()

    assert 'disabled aria-describedby="run-blocker"' in html
    assert reason in html


@pytest.mark.django_db
def test_a_ready_dataset_with_cases_can_be_run(client_alice, agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset)

    html = client_alice.get(_url(dataset)).content.decode()

    assert f'action="{reverse("runs:start", args=[agent.pk, dataset.pk])}"' in html


@pytest.mark.django_db
def test_failed_dataset_shows_its_reason(client_alice, agent):
    dataset = DatasetFactory(agent=agent, status=Dataset.Status.FAILED, failure_reason="No test cases found.")

    html = client_alice.get(_url(dataset)).content.decode()

    assert "No test cases found." in html
    assert 'title="No test cases found."' in html


@pytest.mark.django_db
def test_htmx_request_gets_the_case_list_fragment(client_alice, agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset, question="Where is my order?")

    html = client_alice.get(_url(dataset), **HTMX).content.decode()

    assert '<div id="case-list"' in html
    assert "Where is my order?" in html
    assert "<html" not in html
    assert 'id="run-action" class="run-action" hx-swap-oob="true"' in html


@pytest.mark.django_db
def test_history_restore_gets_the_whole_page(client_alice, agent):
    dataset = DatasetFactory(agent=agent)

    html = client_alice.get(
        _url(dataset), HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    ).content.decode()

    assert "<html" in html


@pytest.mark.django_db
def test_case_text_is_shown_escaped(client_alice, agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset, question='<script>alert(1)</script><b hx-get="/logout/">{{ 7*7 }}</b>')

    html = client_alice.get(_url(dataset)).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'hx-get="/logout/"' not in html
    assert "{{ 7*7 }}" in html


@pytest.mark.django_db
def test_outsider_gets_404(client_charlie, agent):
    dataset = DatasetFactory(agent=agent)

    assert client_charlie.get(_url(dataset)).status_code == 404


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, agent):
    assert client.get(_url(DatasetFactory(agent=agent))).status_code == 302


@pytest.mark.django_db
def test_post_is_not_allowed(client_alice, agent):
    assert client_alice.post(_url(DatasetFactory(agent=agent))).status_code == 405


@pytest.mark.django_db
def test_unknown_dataset_is_404(client_alice, agent):
    assert client_alice.get(reverse("datasets:detail", args=[agent.pk, 999999])).status_code == 404


@pytest.mark.django_db
def test_run_button_is_disabled_for_an_llm_agent_without_a_model(client_alice, team, no_llm):
    from agents.models import Agent
    from tests.factories import AgentFactory

    dataset = DatasetFactory(agent=AgentFactory(team=team, kind=Agent.Kind.LLM))
    TestCaseFactory(dataset=dataset)

    html = client_alice.get(_url(dataset)).content.decode()

    assert 'disabled aria-describedby="run-blocker"' in html
    assert "This LLM agent has no model" in html


@pytest.mark.django_db
def test_an_htmx_refresh_of_the_cases_keeps_the_run_button_disabled_without_a_model(client_alice, team, no_llm):
    from agents.models import Agent
    from tests.factories import AgentFactory

    dataset = DatasetFactory(agent=AgentFactory(team=team, kind=Agent.Kind.LLM))
    TestCaseFactory(dataset=dataset)

    html = client_alice.get(_url(dataset), {"q": "refund"}, **HTMX).content.decode()

    assert 'id="run-action" class="run-action" hx-swap-oob="true"' in html
    assert 'disabled aria-describedby="run-blocker"' in html
