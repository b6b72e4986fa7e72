"""Generated XLSX, DOCX and PDF attachments open in the document preview like uploads do."""

import pytest
from django.urls import reverse
from pytest_django.asserts import assertContains

from datasets.generation.services import dataset_generate
from datasets.models import Dataset
from tests.factories import DatasetFactory

pytestmark = pytest.mark.django_db

DOCUMENTS = {
    "xlsx": {
        "title": "Q1 support budget",
        "document_context": "Excel budget sheet",
        "table": {"columns": ["Month", "Tickets", "Cost"], "rows": [["January", 420, 1890.5], ["February", 388, 1702]]},
    },
    "docx": {
        "title": "Refund policy memo",
        "document_context": "Internal policy memo",
        "paragraphs": [
            "## Purpose",
            "Refunds are granted within 30 days of purchase.",
            "Add-ons are refunded pro rata.",
        ],
    },
    "pdf": {
        "title": "Invoice INV-2025-017",
        "document_context": "Customer invoice",
        "formal": {
            "kind": "invoice",
            "parties": [{"role": "Bill to", "name": "Globex Corporation"}],
            "line_items": {"columns": ["Description", "Amount"], "rows": [["Pro plan", "€98.00"]]},
            "totals": [{"label": "Total", "value": "€98.00"}],
        },
    },
}


@pytest.fixture
def generated(fake_llm, agent, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    cases = [
        {
            "question": f"What does this {kind} document say?",
            "expected_answer": "It says so.",
            "tests_rule": "R3",
            "document": doc,
        }
        for kind, doc in DOCUMENTS.items()
    ]
    fake_llm.add_rule(task="generate", json={"cases": cases})
    dataset = DatasetFactory(
        agent=agent, status=Dataset.Status.EXTRACTING, source=Dataset.Source.GENERATED, generation={"count": 3}
    )
    dataset_generate(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY, dataset.failure_reason
    return dataset


def preview(client, dataset, file_type, **extra):
    case = dataset.cases.get(question__contains=f"this {file_type} document")
    document = case.documents.get()
    url = reverse("datasets:document_preview", args=[dataset.agent_id, dataset.pk, document.pk])
    return client.get(url, {"case": case.pk}, **extra), document


def test_a_generated_xlsx_previews_as_a_table(client_alice, generated):
    response, document = preview(client_alice, generated, "xlsx", HTTP_HX_REQUEST="true")

    assert document.file_type == "xlsx"
    assertContains(response, "Q1 support budget.xlsx")
    assertContains(response, "<td>Month</td><td>Tickets</td><td>Cost</td>")
    assertContains(response, "February")
    assertContains(response, "388")
    assertContains(response, "Show context")  # the case has document context


def test_a_generated_docx_previews_as_headings_and_paragraphs(client_alice, generated):
    response, document = preview(client_alice, generated, "docx", HTTP_HX_REQUEST="true")

    assert document.file_type == "docx"
    assertContains(response, "Refund policy memo.docx")
    assertContains(response, "Purpose")
    assertContains(response, "Add-ons are refunded pro rata.")


def test_a_generated_pdf_opens_in_the_browsers_viewer(client_alice, generated):
    response, document = preview(client_alice, generated, "pdf", HTTP_HX_REQUEST="true")

    assert document.file_type == "pdf"
    view_url = reverse("datasets:document_view", args=[generated.agent_id, generated.pk, document.pk])
    assertContains(response, f'src="{view_url}"')
    pdf = client_alice.get(view_url)
    assert pdf.status_code == 200
    assert pdf["Content-Type"] == "application/pdf"
    assert b"".join(pdf.streaming_content).startswith(b"%PDF-")


def test_the_preview_shows_the_generated_document_context(client_alice, generated):
    case = generated.cases.get(question__contains="this xlsx document")
    document = case.documents.get()
    url = reverse("datasets:document_preview", args=[generated.agent_id, generated.pk, document.pk])

    response = client_alice.get(url, {"case": case.pk, "show": "context"})

    assertContains(response, "Excel budget sheet")


def test_each_generated_document_previews_as_a_page_without_javascript(client_alice, generated):
    for file_type in DOCUMENTS:
        response, document = preview(client_alice, generated, file_type)
        assertContains(response, document.original_name)
        assertContains(response, "Open file")


def test_an_outsider_cannot_preview_a_generated_document(client_charlie, generated):
    response, _ = preview(client_charlie, generated, "xlsx")

    assert response.status_code == 404
