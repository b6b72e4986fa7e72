"""A dataset's status follows its cases: a Failed upload that gets cases by hand or by import
becomes Ready (and can run), and its upload failure stays visible in its notice."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from datasets.models import Dataset
from datasets.selectors import dataset_run_blocker
from datasets.services import case_create, dataset_import_csv
from tests.factories import DatasetFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed(agent) -> Dataset:
    return DatasetFactory(
        agent=agent, status="failed", source="upload", source_name="plan.pdf", failure_reason="The PDF is encrypted."
    )


def test_a_case_added_by_hand_makes_a_failed_upload_ready_and_keeps_the_failure_in_view(client_alice, failed):
    case_create(dataset=failed, question="Where is my order?")

    failed.refresh_from_db()
    assert failed.status == Dataset.Status.READY
    assert "The upload of “plan.pdf” failed: The PDF is encrypted." in failed.notice
    assert dataset_run_blocker(dataset=failed, case_count=1) == ""
    html = client_alice.get(reverse("datasets:detail", args=[failed.agent_id, failed.pk])).content.decode()
    assert "Ready" in html and "The PDF is encrypted." in html
    assert 'disabled aria-describedby="run-blocker"' not in html


def test_an_import_into_a_failed_upload_makes_it_ready(failed):
    dataset_import_csv(dataset=failed, file=SimpleUploadedFile("c.csv", b"question,expected\nQ?,A\n"))

    failed.refresh_from_db()
    assert failed.status == Dataset.Status.READY and "failed" in failed.notice


def test_the_add_case_form_settles_the_status_too(client_alice, failed):
    url = reverse("datasets:case_create", args=[failed.agent_id, failed.pk])

    response = client_alice.post(url, {"question": "Refund after 40 days?", "expected_answer": "No."})

    assert response.status_code in (200, 302)
    failed.refresh_from_db()
    assert failed.status == Dataset.Status.READY


def test_a_ready_dataset_is_left_alone(agent):
    dataset = DatasetFactory(agent=agent, notice="")

    case_create(dataset=dataset, question="Q?")

    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY and dataset.notice == ""
