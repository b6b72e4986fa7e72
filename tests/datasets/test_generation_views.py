"""The "Generate with AI" tab (datasets/new.html?tab=generate) and its POST (datasets:generate)."""

import re

import pytest
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from datasets.models import Dataset
from tests.factories import AgentFactory, DatasetFactory

pytestmark = pytest.mark.django_db


def tab_url(agent):
    return reverse("datasets:new", args=[agent.pk]) + "?tab=generate"


def post_url(agent):
    return reverse("datasets:generate", args=[agent.pk])


def valid(**overrides):
    return {
        "count": "10",
        "instructions": "Focus on edge cases related to pricing",
        "name": "Pricing edge cases",
        **overrides,
    }


# ---- the tab ---------------------------------------------------------------------------


def test_the_tab_asks_for_the_number_of_cases_and_instructions_then_reviews(client_alice, agent, fake_llm):
    response = client_alice.get(tab_url(agent))

    assertContains(response, "Number of Test Cases")
    assertContains(response, 'name="count" id="generate-count" min="1" max="50" step="1" required')
    assertContains(response, 'value="10"')
    assertContains(response, "Additional Instructions")
    assertContains(response, 'placeholder="e.g. Focus on edge cases related to pricing"')
    assertContains(response, "Review &amp; Generate")
    assertContains(response, "Generated with AI")
    assertContains(response, f'action="{post_url(agent)}"')
    assertContains(response, "version 1 of")
    assert not re.search(r'<fieldset class="generate-fieldset"\s+disabled', response.text)


def test_without_a_model_the_tab_says_so_and_is_disabled(client_alice, agent, no_llm):
    response = client_alice.get(tab_url(agent))

    assertContains(response, "Generate with AI needs a model, and none is configured.")
    assert re.search(
        r'<fieldset class="generate-fieldset"\s+disabled aria-describedby="generate-unavailable"', response.text
    )


def test_an_agent_without_configuration_gets_an_explanation_instead_of_the_form(client_alice, team, fake_llm):
    empty = AgentFactory(team=team, version__instructions="", version__knowledge="")

    response = client_alice.get(tab_url(empty))

    assertContains(response, "This agent has no instructions, skills, knowledge or guardrails.")
    assert re.search(
        r'<fieldset class="generate-fieldset"\s+disabled aria-describedby="generate-unavailable"', response.text
    )


# ---- POST ----------------------------------------------------------------------------


def test_generate_creates_the_dataset_and_opens_its_page(
    client_alice, alice, agent, fake_llm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_alice.post(post_url(agent), valid())

    dataset = Dataset.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("datasets:detail", args=[agent.pk, dataset.pk])
    assert (dataset.name, dataset.status, dataset.source) == ("Pricing edge cases", "extracting", "generated")
    assert dataset.generation == {"count": 10, "instructions": "Focus on edge cases related to pricing"}
    assert dataset.created_by == alice
    assert len(callbacks) == 1  # the job is enqueued after commit


def test_htmx_generate_redirects_the_whole_page(client_alice, agent, fake_llm, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        response = client_alice.post(post_url(agent), valid(), HTTP_HX_REQUEST="true")

    dataset = Dataset.objects.get()
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("datasets:detail", args=[agent.pk, dataset.pk])


@pytest.mark.parametrize("count", ["1", "50"])
def test_one_and_fifty_are_accepted(client_alice, agent, fake_llm, count, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        response = client_alice.post(post_url(agent), valid(count=count))

    assert response.status_code == 302
    assert Dataset.objects.get().generation["count"] == int(count)


@pytest.mark.parametrize("count", ["0", "51"])
def test_zero_and_fifty_one_are_rejected_with_a_message(client_alice, agent, fake_llm, count):
    response = client_alice.post(post_url(agent), valid(count=count))

    assertContains(response, "Choose from 1 to 50 test cases.")
    assertContains(response, 'data-start-step="1"')  # back on the step with the problem
    assertContains(response, f'value="{count}"')
    assert not Dataset.objects.exists()


def test_a_missing_count_and_name_are_reported(client_alice, agent, fake_llm):
    response = client_alice.post(post_url(agent), {"count": "", "name": ""})

    assertContains(response, "Enter how many test cases to generate.")
    assertContains(response, "Give the dataset a name.")
    assert not Dataset.objects.exists()


def test_a_name_the_agent_already_uses_sends_the_user_back_to_the_review(client_alice, agent, fake_llm):
    DatasetFactory(agent=agent, name="Pricing edge cases")

    response = client_alice.post(post_url(agent), valid(), HTTP_HX_REQUEST="true")

    assertContains(response, "already has a dataset named")
    assertContains(response, 'data-start-step="2"')
    assertNotContains(response, "<html")  # the form fragment only
    assert Dataset.objects.count() == 1


def test_without_a_model_the_post_is_refused(client_alice, agent, no_llm):
    response = client_alice.post(post_url(agent), valid())

    assertContains(response, "Generating test cases needs a model, and none is configured.")
    assert not Dataset.objects.exists()


def test_generate_needs_post(client_alice, agent):
    assert client_alice.get(post_url(agent)).status_code == 405


def test_an_outsider_gets_404(client_charlie, agent, fake_llm):
    assert client_charlie.post(post_url(agent), valid()).status_code == 404
    assert client_charlie.get(tab_url(agent)).status_code == 404
    assert not Dataset.objects.exists()


def test_anonymous_users_are_sent_to_log_in(client, agent):
    response = client.post(post_url(agent), valid())

    assert response.status_code == 302
    assert response.url.startswith(reverse("accounts:login"))


def test_a_teammate_can_generate(client_bob, agent, fake_llm, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        response = client_bob.post(post_url(agent), valid())

    assert response.status_code == 302
