"""The mapping page: shows the tables found, confirms a (changed) mapping, cancels, stays in the team."""

import pytest
from django.urls import reverse

from datasets.extraction.services import dataset_extract
from datasets.models import Dataset
from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401
from tests.datasets.test_extraction_mapping import _plan_workbook

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Tables need no model."""


@pytest.fixture
def review(agent) -> Dataset:
    return extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)


def mapping_url(dataset: Dataset) -> str:
    return reverse("datasets:mapping", args=[dataset.agent_id, dataset.pk])


def test_the_page_shows_each_sheet_its_header_row_fields_and_first_rows(client_alice, review):
    response = client_alice.get(mapping_url(review))

    html = response.content.decode()
    assert response.status_code == 200
    assert "Map the columns" in html and "Header on row 4" in html and "3 test cases" in html
    assert '<option value="question" selected>Question</option>' in html
    assert "Can I get a refund 40 days after purchase?" in html  # the preview
    assert "Skipped" in html and "glossary sheet" in html  # the glossary, with its reason
    assert 'name="t0_c2"' in html and 'name="t1_include"' in html


def test_the_dataset_page_says_what_to_do_while_the_mapping_waits(client_alice, review):
    response = client_alice.get(reverse("datasets:detail", args=[review.agent_id, review.pk]))

    html = response.content.decode()
    assert "confirm how its columns map" in html and mapping_url(review) in html
    assert "Confirm mapping" in html  # the badge


def test_the_status_poll_sends_the_user_to_the_mapping_page(client_alice, review):
    response = client_alice.get(reverse("datasets:status", args=[review.agent_id, review.pk]), HTTP_HX_REQUEST="true")

    assert response.status_code == 286
    assert response["HX-Redirect"] == mapping_url(review)


def test_posting_a_changed_mapping_creates_the_cases_with_it(client_alice, review, django_capture_on_commit_callbacks):
    data = {f"t0_c{n}": "metadata" for n in range(1, 7)}
    data.update(t0_include="on", t0_c2="question", t0_c5="expected_answer", t0_c4="ignore")
    data.update({f"t1_c{n}": "metadata" for n in (1, 2)})

    with django_capture_on_commit_callbacks() as callbacks:
        response = client_alice.post(mapping_url(review), data)

    assert response.status_code == 302
    assert len(callbacks) == 1  # the extraction job, sent once the choice is saved
    review.refresh_from_db()
    assert review.status == Dataset.Status.EXTRACTING
    dataset_extract(dataset_id=review.pk)
    case = review.cases.order_by("position").first()
    assert case.question == "Refunds" and case.expected_answer == "No, only within 30 days."
    assert "Question" not in case.metadata and case.metadata["ID"] == "TC-1"


def test_a_mapping_without_a_question_is_refused_on_the_page(client_alice, review):
    data = {f"t0_c{n}": "metadata" for n in range(1, 7)}
    data["t0_include"] = "on"

    response = client_alice.post(mapping_url(review), data, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert "map exactly one column to the question" in html
    assert '<form id="mapping-form"' in html and "<html" not in html  # the fragment
    review.refresh_from_db()
    assert review.status == Dataset.Status.REVIEW


def test_over_the_limit_the_page_asks_to_keep_the_first_500(client_alice, agent):
    data = files.xlsx_bytes({"Cases": [["Question", "Expected answer"], *files.qa_rows(612)]})
    dataset = extract(agent, "big.xlsx", data, confirm=False)

    html = client_alice.get(mapping_url(dataset)).content.decode()
    assert "The file has 612 test cases; at most 500 can be kept" in html
    assert "leave the other 112 out" in html

    refused = client_alice.post(
        mapping_url(dataset), {"t0_include": "on", "t0_c1": "question", "t0_c2": "expected_answer"}
    )
    assert "keep the first 500, or cancel" in refused.content.decode()


def test_cancel_deletes_the_upload(client_alice, review):
    response = client_alice.post(reverse("datasets:mapping_cancel", args=[review.agent_id, review.pk]))

    assert response.status_code == 302
    assert not Dataset.objects.filter(pk=review.pk).exists()


def test_cancel_needs_post_and_the_page_is_404_for_another_team(client_alice, client_charlie, review):
    assert client_alice.get(reverse("datasets:mapping_cancel", args=[review.agent_id, review.pk])).status_code == 405
    assert client_charlie.get(mapping_url(review)).status_code == 404
    assert client_charlie.post(reverse("datasets:mapping_cancel", args=[review.agent_id, review.pk])).status_code == 404


def test_a_settled_dataset_redirects_from_the_mapping_page(client_alice, agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook())

    response = client_alice.get(mapping_url(dataset))

    assert response.status_code == 302


def test_import_warnings_can_be_marked_as_read(client_alice, client_charlie, agent):
    dataset = extract(agent, "gaps.csv", files.csv_bytes([["question", "expected"], ["One?", ""]]))
    url = reverse("datasets:warnings_dismiss", args=[agent.pk, dataset.pk])
    assert dataset.status_label == "Ready with warnings"
    assert client_charlie.post(url).status_code == 404
    assert client_alice.get(url).status_code == 405

    response = client_alice.post(url, HTTP_HX_REQUEST="true")

    assert response.status_code == 200 and response["HX-Refresh"] == "true"
    dataset.refresh_from_db()
    assert dataset.warnings == [] and dataset.status_label == "Ready"
    assert dataset.cases.get().import_warnings  # the case keeps its own


def test_a_document_over_the_limit_without_tables_asks_only_about_the_limit(client_alice, agent):
    text = "\n\n".join(
        f"Question: How do I reset password variant {n}?\nExpected answer: Answer {n}." for n in range(501)
    )
    dataset = extract(agent, "cases.md", text.encode(), confirm=False)
    assert dataset.status == Dataset.Status.REVIEW and dataset.mapping["tables"] == []

    html = client_alice.get(mapping_url(dataset)).content.decode()
    assert "The file has 501 test cases; at most 500 can be kept" in html

    client_alice.post(mapping_url(dataset), {"keep_first": "on"})
    dataset_extract(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY and dataset.cases.count() == 500


def test_while_the_mapping_waits_adding_and_importing_cases_is_not_offered(client_alice, review):
    html = client_alice.get(reverse("datasets:detail", args=[review.agent_id, review.pk])).content.decode()

    assert 'title="Confirm the column mapping first">+ Add test case</button>' in html
    assert "import_csv" not in html and "EvalSet JSON (ADK" not in html
    assert "once you <a href=" in html
