"""Add a test case from the dataset page (datasets:case_create)."""

import pytest
from django.urls import reverse

from datasets.models import TestCase
from tests.factories import DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


def _url(dataset) -> str:
    return reverse("datasets:case_create", args=[dataset.agent_id, dataset.pk])


@pytest.mark.django_db
def test_htmx_get_opens_a_dialog_with_simple_fields_up_front(client_alice, dataset):
    html = client_alice.get(_url(dataset), **HTMX).content.decode()

    assert html.lstrip().startswith('<dialog data-autoopen class="wide"')
    assert 'name="question"' in html and 'name="expected_answer"' in html
    # Advanced fields are there, folded away until asked for.
    assert '<details class="advanced">' in html
    assert 'name="turn_user"' in html and 'name="tool_name"' in html and 'name="context_chunk"' in html


@pytest.mark.django_db
def test_a_simple_case_is_added_at_the_end_and_the_list_refreshes(client_alice, dataset):
    TestCaseFactory(dataset=dataset, position=4)

    response = client_alice.post(
        _url(dataset), {"question": " Where is my order? ", "expected_answer": "Track it."}, **HTMX
    )

    case = TestCase.objects.get(question="Where is my order?")
    assert case.expected_answer == "Track it."
    assert case.position == 5
    assert case.trajectory_mode == "strict" and case.turns == [] and case.tags == []
    assert response["HX-Retarget"] == "#dialog-slot"
    assert "casesChanged" in response["HX-Trigger"] and "Test case added." in response["HX-Trigger"]


@pytest.mark.django_db
def test_advanced_fields_are_saved(client_alice, dataset):
    data = {
        "question": "And the refund?",
        "expected_answer": "Refunded in 5 days.",
        "document_context": "Order confirmation PDF",
        "case_id": "refund-002",
        "turn_user": ["I bought a phone last week.", ""],
        "turn_expected": ["Sorry to hear that.", ""],
        "tool_name": ["lookup_order", "create_refund", ""],
        "tool_args": ['{"order_id": "A-1"}', "", ""],
        "trajectory_mode": "unordered",
        "check_tool_args": "on",
        "context_chunk": ["Refunds take 5 days.", ""],
        "judge_guideline": "Must mention 5 days.",
        "tags": "refunds, phones, refunds",
        "smoke_count": "3",
        "smoke_guidance": "casual tone",
    }

    client_alice.post(_url(dataset), data, **HTMX)

    case = TestCase.objects.get()
    assert case.case_id == "refund-002"
    assert case.turns == [{"user": "I bought a phone last week.", "expected": "Sorry to hear that."}]
    assert case.expected_tools == [
        {"name": "lookup_order", "args": {"order_id": "A-1"}},
        {"name": "create_refund", "args": {}},
    ]
    assert case.trajectory_mode == "unordered" and case.check_tool_args
    assert case.expected_context == ["Refunds take 5 days."]
    assert case.tags == ["refunds", "phones"]
    assert case.smoke_count == 3 and case.smoke_guidance == "casual tone"
    assert case.document_context == "Order confirmation PDF"
    assert case.judge_guideline == "Must mention 5 days."


@pytest.mark.django_db
def test_errors_appear_next_to_their_fields_and_nothing_is_saved(client_alice, dataset):
    TestCaseFactory(dataset=dataset, case_id="taken")
    data = {
        "question": "",
        "case_id": "taken",
        "tool_name": ["lookup"],
        "tool_args": ["{not json"],
        "turn_user": [""],
        "turn_expected": ["a reply without a user turn"],
        "smoke_count": "11",
    }

    response = client_alice.post(_url(dataset), data, **HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="case-editor"')
    assert "Write the question the agent should answer." in html
    assert "Enter a whole number from 1 to 10, or leave it empty." in html
    assert "Tool 1: the arguments are not valid JSON" in html
    assert "Turn 1: write the user message, or clear its expected reply." in html
    assert '<details class="advanced" open>' in html
    assert 'id="id_question_error"' in html
    assert TestCase.objects.count() == 1


@pytest.mark.django_db
def test_a_case_id_already_used_is_refused_next_to_the_field(client_alice, dataset):
    TestCaseFactory(dataset=dataset, case_id="refund-001")

    html = client_alice.post(_url(dataset), {"question": "Q", "case_id": "refund-001"}, **HTMX).content.decode()

    assert "Another test case in this dataset already uses the id “refund-001”." in html
    assert 'id="id_case_id_error"' in html


@pytest.mark.django_db
def test_save_and_add_another_returns_a_fresh_form(client_alice, dataset):
    response = client_alice.post(_url(dataset), {"question": "First", "add_another": "1"}, **HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="case-editor"')
    assert "First" not in html
    assert "casesChanged" in response["HX-Trigger"]
    assert TestCase.objects.filter(question="First").exists()


@pytest.mark.django_db
def test_plain_form_works_without_javascript(client_alice, dataset):
    page = client_alice.get(_url(dataset))
    response = client_alice.post(_url(dataset), {"question": "Plain"})

    assert "<html" in page.content.decode()
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:detail", args=[dataset.agent_id, dataset.pk])
    assert TestCase.objects.filter(question="Plain").exists()


@pytest.mark.django_db
def test_outsider_gets_404_and_adds_nothing(client_charlie, dataset):
    assert client_charlie.get(_url(dataset), **HTMX).status_code == 404
    assert client_charlie.post(_url(dataset), {"question": "Injected"}).status_code == 404
    assert not TestCase.objects.exists()


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, dataset):
    assert client.post(_url(dataset), {"question": "x"}).status_code == 302
    assert not TestCase.objects.exists()


@pytest.mark.django_db
def test_put_is_not_allowed(client_alice, dataset):
    assert client_alice.put(_url(dataset)).status_code == 405


@pytest.mark.django_db
def test_no_case_is_added_by_hand_while_the_dataset_is_extracting(client_alice, agent):
    from datasets.models import Dataset

    dataset = DatasetFactory(agent=agent, status=Dataset.Status.EXTRACTING)

    page = client_alice.get(reverse("datasets:detail", args=[agent.pk, dataset.pk])).content.decode()
    html = client_alice.post(_url(dataset), {"question": "Too early"}, **HTMX).content.decode()

    assert 'disabled title="Wait until the extraction finishes">+ Add test case' in page
    assert "Test cases are still being extracted." in html
    assert not TestCase.objects.exists()
