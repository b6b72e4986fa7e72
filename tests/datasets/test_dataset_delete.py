"""Delete a dataset with its cases and documents; runs keep their snapshot (datasets:delete)."""

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse

from datasets.models import Dataset, Document, TestCase
from runs.models import Run, RunCase
from tests.factories import DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent, name="Refunds")


def _url(dataset, source: str = "") -> str:
    url = reverse("datasets:delete", args=[dataset.agent_id, dataset.pk])
    return f"{url}?from={source}" if source else url


@pytest.mark.django_db
def test_htmx_get_asks_for_confirmation_in_a_dialog(client_alice, dataset):
    TestCaseFactory.create_batch(3, dataset=dataset)

    html = client_alice.get(_url(dataset), **HTMX).content.decode()

    assert html.lstrip().startswith("<dialog data-autoopen")
    assert "permanently deletes <strong>Refunds</strong>" in html
    assert "3 test cases" in html


@pytest.mark.django_db(transaction=True)
def test_delete_removes_cases_documents_and_files_but_not_runs(client_alice, dataset, agent, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    case = TestCaseFactory(dataset=dataset)
    document = Document(team=agent.team, dataset=dataset, original_name="plan.pdf", file_type="pdf")
    document.file.save("plan.pdf", ContentFile(b"%PDF-1.4 test"), save=True)
    case.documents.add(document)
    stored = tmp_path / document.file.name
    run = Run.objects.create(
        agent=agent, agent_version=agent.current_version, dataset=dataset, dataset_name=dataset.name
    )
    RunCase.objects.create(run=run, position=0, source_case=case, question=case.question)
    assert stored.exists()

    response = client_alice.post(_url(dataset), **HTMX)

    assert response.status_code == 200
    assert "datasetsChanged" in response["HX-Trigger"]
    assert response["HX-Retarget"] == "#dialog-slot"
    assert not Dataset.objects.filter(pk=dataset.pk).exists()
    assert not TestCase.objects.exists()
    assert not Document.objects.exists()
    assert not stored.exists()
    run.refresh_from_db()
    assert run.dataset is None and run.dataset_name == "Refunds"
    snapshot = RunCase.objects.get(run=run)
    assert snapshot.question == case.question and snapshot.source_case is None


@pytest.mark.django_db
def test_delete_from_the_dataset_page_goes_back_to_the_list(client_alice, dataset):
    response = client_alice.post(_url(dataset), {"from": "detail"}, **HTMX)

    assert response["HX-Redirect"] == reverse("datasets:list", args=[dataset.agent_id])
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_plain_form_works_without_javascript(client_alice, dataset):
    page = client_alice.get(_url(dataset))
    response = client_alice.post(_url(dataset))

    assert "<html" in page.content.decode()
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:list", args=[dataset.agent_id])
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_teammate_can_delete(client_bob, dataset):
    assert client_bob.post(_url(dataset)).status_code == 302
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_outsider_gets_404_and_nothing_is_deleted(client_charlie, dataset):
    assert client_charlie.get(_url(dataset), **HTMX).status_code == 404
    assert client_charlie.post(_url(dataset)).status_code == 404
    assert Dataset.objects.filter(pk=dataset.pk).exists()


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, dataset):
    assert client.post(_url(dataset)).status_code == 302
    assert Dataset.objects.filter(pk=dataset.pk).exists()


@pytest.mark.django_db
def test_put_is_not_allowed(client_alice, dataset):
    assert client_alice.put(_url(dataset)).status_code == 405
