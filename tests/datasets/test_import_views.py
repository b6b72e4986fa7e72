"""Import dialogs on the dataset page (datasets:import_csv, datasets:import_json)."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.factories import DatasetFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


def _url(dataset, kind: str) -> str:
    return reverse(f"datasets:import_{kind}", args=[dataset.agent_id, dataset.pk])


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "title"), [("csv", "Import CSV"), ("json", "Import EvalSet JSON")])
def test_htmx_get_opens_the_import_dialog(client_alice, dataset, kind, title):
    html = client_alice.get(_url(dataset, kind), **HTMX).content.decode()

    assert html.lstrip().startswith("<dialog data-autoopen")
    assert title in html and 'type="file"' in html


@pytest.mark.django_db
def test_csv_import_closes_the_dialog_refreshes_the_cases_and_says_how_many(client_alice, dataset):
    upload = SimpleUploadedFile("cases.csv", b"question,expected_answer\nA?,a\nB?,b\n")

    response = client_alice.post(_url(dataset, "csv"), {"file": upload}, **HTMX)

    assert dataset.cases.count() == 2
    assert response["HX-Retarget"] == "#dialog-slot"
    trigger = json.loads(response["HX-Trigger"])
    assert "casesChanged" in trigger
    assert trigger["toast"]["message"] == "Imported 2 test cases."


@pytest.mark.django_db
def test_json_import_works_the_same_way(client_alice, dataset):
    eval_set = {"eval_cases": [{"eval_id": "x", "conversation": [{"user_content": {"parts": [{"text": "Hi"}]}}]}]}
    upload = SimpleUploadedFile("set.json", json.dumps(eval_set).encode())

    response = client_alice.post(_url(dataset, "json"), {"file": upload}, **HTMX)

    assert response.status_code == 200
    assert dataset.cases.get().case_id == "x"


@pytest.mark.django_db
def test_a_bad_file_keeps_the_dialog_open_with_the_row_numbers(client_alice, dataset):
    upload = SimpleUploadedFile("cases.csv", b"question,expected_answer\nfine,ok\n,no question\n")

    response = client_alice.post(_url(dataset, "csv"), {"file": upload}, **HTMX)

    html = response.content.decode()
    assert "Nothing was imported." in html
    assert "Row 3: Question: Write the question the agent should answer." in html
    assert "HX-Retarget" not in response
    assert not dataset.cases.exists()


@pytest.mark.django_db
def test_the_wrong_extension_is_refused(client_alice, dataset):
    upload = SimpleUploadedFile("cases.xlsx", b"PK\x03\x04")

    html = client_alice.post(_url(dataset, "csv"), {"file": upload}, **HTMX).content.decode()

    assert "Choose a .csv or .tsv or .txt file" in html


@pytest.mark.django_db
def test_a_file_over_the_limit_is_refused_with_its_size(client_alice, dataset, settings):
    settings.UPLOAD_MAX_BYTES = 100_000
    upload = SimpleUploadedFile("cases.csv", b"question\n" + b"x" * 300_000)

    html = client_alice.post(_url(dataset, "csv"), {"file": upload}, **HTMX).content.decode()

    assert "the limit is 0.1 MB" in html
    assert not dataset.cases.exists()


@pytest.mark.django_db
def test_plain_form_works_without_javascript(client_alice, dataset):
    page = client_alice.get(_url(dataset, "csv"))
    upload = SimpleUploadedFile("cases.csv", b"question\nA?\n")
    response = client_alice.post(_url(dataset, "csv"), {"file": upload})

    assert "<html" in page.content.decode()
    assert response.status_code == 302
    assert dataset.cases.count() == 1


@pytest.mark.django_db
def test_post_without_csrf_token_is_refused(dataset, alice):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    upload = SimpleUploadedFile("cases.csv", b"question\nA?\n")

    assert client.post(_url(dataset, "csv"), {"file": upload}).status_code == 403
    assert not dataset.cases.exists()


@pytest.mark.django_db
def test_outsider_gets_404_and_imports_nothing(client_charlie, dataset):
    upload = SimpleUploadedFile("cases.csv", b"question\nA?\n")

    assert client_charlie.get(_url(dataset, "json"), **HTMX).status_code == 404
    assert client_charlie.post(_url(dataset, "csv"), {"file": upload}).status_code == 404
    assert not dataset.cases.exists()


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, dataset):
    assert client.get(_url(dataset, "csv")).status_code == 302


@pytest.mark.django_db
def test_put_is_not_allowed(client_alice, dataset):
    assert client_alice.put(_url(dataset, "csv")).status_code == 405
    assert client_alice.put(_url(dataset, "json")).status_code == 405


@pytest.mark.django_db
def test_nothing_is_imported_while_the_dataset_is_extracting(client_alice, agent):
    from datasets.models import Dataset

    dataset = DatasetFactory(agent=agent, status=Dataset.Status.EXTRACTING)
    upload = SimpleUploadedFile("cases.csv", b"question\nA?\n")

    html = client_alice.post(_url(dataset, "csv"), {"file": upload}, **HTMX).content.decode()

    assert "Test cases are still being extracted." in html
    assert not dataset.cases.exists()


@pytest.mark.django_db
def test_scenario_cases_are_imported_and_shown_with_a_scenario_badge(client_alice, dataset):
    eval_set = {
        "eval_cases": [
            {"eval_id": "x", "conversation": [{"user_content": {"parts": [{"text": "Hi"}]}}]},
            {"eval_id": "sim", "conversation_scenario": {"starting_prompt": "Hi", "conversation_plan": "Ask twice"}},
        ]
    }
    upload = SimpleUploadedFile("set.json", json.dumps(eval_set).encode())

    response = client_alice.post(_url(dataset, "json"), {"file": upload}, follow=True)

    html = response.content.decode()
    assert dataset.cases.count() == 2
    assert '<span class="badge badge-info">Scenario</span>' in html
    assert "Ask twice" in html
