"""New dataset: empty, or from a CSV / EvalSet JSON file (datasets:create)."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from datasets.models import Dataset
from tests.factories import DatasetFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


def _url(agent) -> str:
    return reverse("datasets:create", args=[agent.pk])


@pytest.mark.django_db
def test_page_shows_the_form(client_alice, agent):
    response = client_alice.get(_url(agent))

    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="name"' in html and 'type="file"' in html
    assert "<html" in html


@pytest.mark.django_db
def test_htmx_get_returns_the_form_in_a_dialog(client_alice, agent):
    html = client_alice.get(_url(agent), **HTMX).content.decode()

    assert html.lstrip().startswith("<dialog data-autoopen")
    assert "<html" not in html


@pytest.mark.django_db
def test_it_creates_an_empty_dataset_and_opens_it(client_alice, agent, alice):
    response = client_alice.post(_url(agent), {"name": "  Refund  questions "})

    dataset = Dataset.objects.get(agent=agent)
    assert dataset.name == "Refund questions"
    assert dataset.created_by == alice
    assert dataset.source == Dataset.Source.MANUAL
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:detail", args=[agent.pk, dataset.pk])


@pytest.mark.django_db
def test_htmx_post_redirects_the_client(client_alice, agent):
    response = client_alice.post(_url(agent), {"name": "Smoke"}, **HTMX)

    dataset = Dataset.objects.get(agent=agent)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("datasets:detail", args=[agent.pk, dataset.pk])


@pytest.mark.django_db
def test_a_name_the_agent_already_uses_is_refused_next_to_the_field(client_alice, agent):
    DatasetFactory(agent=agent, name="Refunds")

    response = client_alice.post(_url(agent), {"name": "refunds"}, **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert "This agent already has a dataset named “refunds”" in html
    assert 'class="errorlist' in html
    assert Dataset.objects.filter(agent=agent).count() == 1


@pytest.mark.django_db
def test_the_name_is_required_and_at_most_120_characters(client_alice, agent):
    missing = client_alice.post(_url(agent), {"name": ""}, **HTMX).content.decode()
    too_long = client_alice.post(_url(agent), {"name": "x" * 121}, **HTMX).content.decode()

    assert "Give the dataset a name." in missing
    assert "Use at most 120 characters (it has 121)." in too_long
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_the_101st_dataset_is_refused_with_a_clear_message(client_alice, agent, settings):
    settings.EVALSITE_MAX_DATASETS_PER_AGENT = 2
    DatasetFactory.create_batch(2, agent=agent)

    html = client_alice.post(_url(agent), {"name": "One more"}, **HTMX).content.decode()

    assert "This agent already has 2 datasets, the most it can have." in html
    assert Dataset.objects.filter(agent=agent).count() == 2


@pytest.mark.django_db
def test_a_csv_file_makes_a_dataset_named_after_the_file(client_alice, agent):
    upload = SimpleUploadedFile("Refund plan.csv", b"question,expected_answer\nHow long?,30 days\nWho?,Support\n")

    client_alice.post(_url(agent), {"name": "", "file": upload})

    dataset = Dataset.objects.get(agent=agent)
    assert dataset.name == "Refund plan"
    assert dataset.source == Dataset.Source.IMPORT
    assert dataset.source_name == "Refund plan.csv"
    assert list(dataset.cases.values_list("question", flat=True)) == ["How long?", "Who?"]


@pytest.mark.django_db
def test_an_eval_set_file_brings_its_name_and_scoring_settings(client_alice, agent):
    eval_set = {
        "eval_set_id": "support",
        "name": "Support eval set",
        "eval_cases": [{"eval_id": "a", "conversation": [{"user_content": {"parts": [{"text": "Hi?"}]}}]}],
        "evalsite": {"scoring": {"pass_threshold": 9}},
    }
    upload = SimpleUploadedFile("set.json", json.dumps(eval_set).encode())

    client_alice.post(_url(agent), {"file": upload})

    dataset = Dataset.objects.get(agent=agent)
    assert dataset.name == "Support eval set"
    assert dataset.pass_threshold == 9
    assert dataset.cases.get().case_id == "a"


@pytest.mark.django_db
def test_a_bad_file_creates_no_dataset_and_names_the_row(client_alice, agent):
    upload = SimpleUploadedFile("bad.csv", b"question,expected_answer\nFine,ok\n,missing question\n")

    response = client_alice.post(_url(agent), {"name": "Broken", "file": upload}, **HTMX)

    assert "Row 3: Question" in response.content.decode()
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_a_file_over_the_limit_is_refused_before_it_is_stored(client_alice, agent, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    upload = SimpleUploadedFile("big.csv", b"question\n" + b"x" * 200_000)

    response = client_alice.post(_url(agent), {"name": "Big", "file": upload}, **HTMX)

    assert "the limit is 0.001 MB" in response.content.decode()
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_post_without_csrf_token_is_refused(agent, alice):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    assert client.post(_url(agent), {"name": "Sneaky"}).status_code == 403
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_outsider_gets_404(client_charlie, agent):
    assert client_charlie.get(_url(agent)).status_code == 404
    assert client_charlie.post(_url(agent), {"name": "Mine"}).status_code == 404
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, agent):
    assert client.post(_url(agent), {"name": "x"}).status_code == 302
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_put_is_not_allowed(client_alice, agent):
    assert client_alice.put(_url(agent)).status_code == 405
