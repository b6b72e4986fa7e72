"""Test Case Search: as you type, paginated, bounded queries (datasets:case_search)."""

import pytest
from django.urls import reverse

from datasets.models import Document, TestCase
from tests.factories import DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


def _html(response) -> str:
    """The page's text with the search terms' <mark> tags taken out (test_case_card.py tests them)."""
    return response.content.decode().replace("<mark>", "").replace("</mark>", "")


def _url(dataset) -> str:
    return reverse("datasets:case_search", args=[dataset.agent_id, dataset.pk])


@pytest.mark.django_db
def test_it_searches_question_expected_answer_and_document_context(client_alice, dataset):
    TestCaseFactory(dataset=dataset, question="How do refunds work?", expected_answer="Within 30 days.")
    TestCaseFactory(dataset=dataset, question="Opening hours?", expected_answer="Refunds are separate: 9-17.")
    TestCaseFactory(dataset=dataset, question="Budget question", document_context="Refund budget sheet")
    TestCaseFactory(dataset=dataset, question="Unrelated", expected_answer="Nothing here.")

    html = _html(client_alice.get(_url(dataset), {"q": "REFUND"}, **HTMX))

    assert "How do refunds work?" in html and "Opening hours?" in html and "Budget question" in html
    assert "Unrelated" not in html
    assert "3 of 4 test cases match “REFUND”" in html


@pytest.mark.django_db
def test_every_word_must_match_somewhere(client_alice, dataset):
    TestCaseFactory(dataset=dataset, question="Refund for a broken phone", expected_answer="Yes")
    TestCaseFactory(dataset=dataset, question="Refund for shoes", expected_answer="Yes")

    html = _html(client_alice.get(_url(dataset), {"q": "refund phone"}, **HTMX))

    assert "broken phone" in html and "shoes" not in html


@pytest.mark.django_db
def test_no_match_says_so(client_alice, dataset):
    TestCaseFactory(dataset=dataset)

    html = _html(client_alice.get(_url(dataset), {"q": "zebra"}, **HTMX))

    assert "No test case matches “zebra”." in html


@pytest.mark.django_db
def test_results_are_paginated_25_per_page(client_alice, dataset):
    TestCase.objects.bulk_create(
        TestCase(dataset=dataset, position=i, question=f"Question number {i:03d}") for i in range(60)
    )

    page_1 = _html(client_alice.get(_url(dataset), **HTMX))
    page_3 = _html(client_alice.get(_url(dataset), {"page": 3}, **HTMX))

    assert "Question number 024" in page_1 and "Question number 025" not in page_1
    assert "Page 1 of 3" in page_1
    assert "Question number 050" in page_3 and "Question number 049" not in page_3


@pytest.mark.django_db
def test_search_at_500_cases_costs_a_bounded_number_of_queries(
    client_alice, dataset, agent, django_assert_max_num_queries
):
    cases = TestCase.objects.bulk_create(
        TestCase(
            dataset=dataset,
            position=i,
            question=f"How long is the refund window for order {i}?",
            expected_answer="30 days",
            tags=["refunds"],
            turns=[{"user": "Hi", "expected": ""}] if i % 7 == 0 else [],
        )
        for i in range(500)
    )
    document = Document.objects.create(team=agent.team, dataset=dataset, original_name="policy.pdf", file_type="pdf")
    for case in cases[:50]:
        case.documents.add(document)

    # session, user, team (middleware + context processor), agent, dataset, count, page, documents
    with django_assert_max_num_queries(12):
        response = client_alice.get(_url(dataset), {"q": "refund window"}, **HTMX)
    assert response.status_code == 200
    assert "500 of 500 test cases match" in response.content.decode()

    with django_assert_max_num_queries(12):
        page = client_alice.get(_url(dataset), {"q": "order 49", "page": 1}, **HTMX)
    assert "How long is the refund window for order 49?" in _html(page)

    with django_assert_max_num_queries(16):
        full = client_alice.get(reverse("datasets:detail", args=[agent.pk, dataset.pk]), {"page": 2})
    assert "policy.pdf" in full.content.decode()


@pytest.mark.django_db
def test_without_htmx_it_is_the_whole_dataset_page(client_alice, dataset):
    TestCaseFactory(dataset=dataset, question="Findable")

    html = _html(client_alice.get(_url(dataset), {"q": "find"}))

    assert "<html" in html and "Findable" in html
    assert 'value="find"' in html


@pytest.mark.django_db
def test_outsider_gets_404(client_charlie, dataset):
    assert client_charlie.get(_url(dataset), {"q": "x"}, **HTMX).status_code == 404


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, dataset):
    assert client.get(_url(dataset), **HTMX).status_code == 302


@pytest.mark.django_db
def test_post_is_not_allowed(client_alice, dataset):
    assert client_alice.post(_url(dataset), **HTMX).status_code == 405
