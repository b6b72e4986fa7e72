"""The case card on the dataset page: contexts and guideline, its source apart from its
attachments, and why a search matched (terms marked, text escaped)."""

import re

import pytest
from django.urls import reverse

from datasets.models import Document
from tests.factories import DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


def _search(client, dataset, query=""):
    url = reverse("datasets:case_search", args=[dataset.agent_id, dataset.pk])
    return client.get(url, {"q": query}, **HTMX).content.decode()


def _card(html: str, case) -> str:
    match = re.search(
        rf'<li class="case-item[^"]*" id="case-{case.pk}">(.*?)</li>\s*(?=<li class="case-item|</ol>)', html, re.S
    )
    assert match, html
    return match.group(1)


@pytest.mark.django_db
def test_the_card_shows_document_context_retrieval_context_and_guideline(client_alice, dataset):
    case = TestCaseFactory(
        dataset=dataset,
        question="How long is the refund window?",
        document_context="Refund policy, section 2",
        expected_context=["Refunds are available within 30 days.", "Exceptions need a manager.", "Third chunk"],
        judge_guideline="Must name the 30 days.",
    )
    plain = TestCaseFactory(dataset=dataset, question="Hello?")

    html = _search(client_alice, dataset)
    card = _card(html, case)
    assert "Document context" in card and "Refund policy, section 2" in card
    assert "Retrieval context" in card and "(3 chunks)" in card
    assert "Refunds are available within 30 days." in card and "+1 more" in card
    assert "Judge guideline" in card and "Must name the 30 days." in card
    assert "case-details" not in _card(html, plain)


@pytest.mark.django_db
def test_a_search_marks_its_terms_and_escapes_everything_else(client_alice, dataset):
    case = TestCaseFactory(dataset=dataset, question='<img src=x onerror="alert(1)"> Refund after 40 days?')

    card = _card(_search(client_alice, dataset, "refund"), case)

    assert "<mark>Refund</mark>" in card
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in card
    assert "<img" not in card


@pytest.mark.django_db
def test_a_match_deep_in_a_long_context_is_shown_around_the_match(client_alice, dataset):
    context = "Background. " * 60 + "The SLA credit is 10% per hour." + " More text." * 40
    case = TestCaseFactory(dataset=dataset, question="What credit applies?", document_context=context)

    card = _card(_search(client_alice, dataset, "credit 10%"), case)

    assert "is-match" in card
    assert "<mark>credit</mark> is <mark>10%</mark> per hour" in card
    assert "…" in card


@pytest.mark.django_db
def test_the_judge_guideline_is_searched_and_says_it_matched(client_alice, dataset):
    TestCaseFactory(dataset=dataset, question="Other")
    case = TestCaseFactory(dataset=dataset, question="Hours?", judge_guideline="Accept any polite wording")

    html = _search(client_alice, dataset, "polite")

    assert "1 of 2 test cases match" in html
    assert "<mark>polite</mark>" in _card(html, case)


@pytest.mark.django_db
def test_the_source_opens_the_preview_at_the_case_and_attachments_are_apart(client_alice, dataset, agent):
    source = Document.objects.create(team=agent.team, dataset=dataset, original_name="plan.xlsx", file_type="xlsx")
    invoice = Document.objects.create(team=agent.team, dataset=dataset, original_name="invoice.pdf", file_type="pdf")
    case = TestCaseFactory(
        dataset=dataset, question="Q?", source_document=source, source_file="plan.xlsx", source_location="Plan row 3"
    )
    case.documents.add(invoice)

    card = _card(_search(client_alice, dataset), case)

    preview = reverse("datasets:document_preview", args=[agent.pk, dataset.pk, source.pk])
    assert f'href="{preview}?case={case.pk}"' in card
    assert "plan.xlsx, Plan row 3" in card
    assert "Source" in card and "not sent to the agent" in card
    attachments = card[card.index("Attachments") : card.index("case-source")]
    assert "invoice.pdf" in attachments and "plan.xlsx" not in attachments
