"""Scoring settings of a dataset (datasets:settings)."""

import pytest
from django.urls import reverse

from tests.factories import DatasetFactory

HTMX = {"HTTP_HX_REQUEST": "true"}

VALID = {
    "acceptance_criteria": "States the 30-day window.",
    "rejection_criteria": "Promises a refund after 30 days.",
    "evaluation_criteria": "Correctness first.",
    "judge_model": "openai/gpt-4o-mini",
    "judge_prompt": "",
    "pass_threshold": "8",
    "number_of_requests": "3",
    "jaccard_enabled": "on",
}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


def _url(dataset) -> str:
    return reverse("datasets:settings", args=[dataset.agent_id, dataset.pk])


@pytest.mark.django_db
def test_defaults_are_threshold_7_one_request_jaccard_on_vector_off(dataset):
    assert (dataset.pass_threshold, dataset.number_of_requests) == (7, 1)
    assert dataset.jaccard_enabled and not dataset.vector_enabled


@pytest.mark.django_db
def test_htmx_save_returns_the_card_with_a_toast(client_alice, dataset):
    response = client_alice.post(_url(dataset), VALID, **HTMX)

    dataset.refresh_from_db()
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<details class="card settings-card" id="settings-card" open')
    assert "Pass at 8/10" in html
    assert "Scoring settings saved." in response["HX-Trigger"]
    assert dataset.pass_threshold == 8 and dataset.number_of_requests == 3
    assert dataset.acceptance_criteria == "States the 30-day window."
    assert dataset.judge_model == "openai/gpt-4o-mini"
    assert dataset.jaccard_enabled and not dataset.vector_enabled


@pytest.mark.django_db
def test_out_of_range_values_are_refused_next_to_the_field(client_alice, dataset):
    response = client_alice.post(_url(dataset), {**VALID, "pass_threshold": "11", "number_of_requests": "0"}, **HTMX)

    html = response.content.decode()
    assert "Ensure this value is less than or equal to 10." in html
    assert "Ensure this value is greater than or equal to 1." in html
    assert "HX-Trigger" not in response
    dataset.refresh_from_db()
    assert dataset.pass_threshold == 7


@pytest.mark.django_db
def test_plain_form_saves_and_redirects(client_alice, dataset):
    page = client_alice.get(_url(dataset))
    response = client_alice.post(_url(dataset), {**VALID, "vector_enabled": "on"})

    assert "<html" in page.content.decode()
    assert response.status_code == 302
    dataset.refresh_from_db()
    assert dataset.vector_enabled


@pytest.mark.django_db
def test_htmx_get_returns_the_card_alone(client_alice, dataset):
    html = client_alice.get(_url(dataset), **HTMX).content.decode()

    assert html.lstrip().startswith('<details class="card settings-card"')
    assert "<html" not in html


@pytest.mark.django_db
def test_outsider_gets_404_and_changes_nothing(client_charlie, dataset):
    assert client_charlie.post(_url(dataset), VALID).status_code == 404
    dataset.refresh_from_db()
    assert dataset.pass_threshold == 7


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, dataset):
    assert client.post(_url(dataset), VALID).status_code == 302


@pytest.mark.django_db
def test_put_is_not_allowed(client_alice, dataset):
    assert client_alice.put(_url(dataset)).status_code == 405


@pytest.mark.django_db
def test_the_facts_do_not_promise_re_asks_the_offline_scorer_never_makes(client_alice, dataset, no_llm, settings):
    """Issue 34, item 6: "re-ask x2" beside a judge that is the offline scorer."""
    dataset.judge_resamples, dataset.alignment_examples = 2, 3
    dataset.save()

    offline = client_alice.get(_url(dataset), **HTMX).content.decode().split("</summary>")[0]
    settings.EVALSITE_JUDGE_MODEL = "openai/gpt-4o-mini"
    with_model = client_alice.get(_url(dataset), **HTMX).content.decode().split("</summary>")[0]

    assert "re-ask" not in offline and "reviewer example" not in offline
    assert "offline reference scorer" in offline
    assert "judge asked 3 times near the pass line" in with_model and "3 reviewer examples" in with_model
