"""Edit a test case (datasets:case_edit)."""

import pytest
from django.urls import reverse

from datasets.models import Document
from tests.factories import DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def case(agent):
    return TestCaseFactory(
        dataset=DatasetFactory(agent=agent),
        question="How long is the refund window?",
        case_id="refund-001",
        expected_tools=[{"name": "lookup_order", "args": {"order_id": "A-1"}}],
        turns=[{"user": "Hi", "expected": "Hello"}],
        tags=["refunds"],
        source_file="plan.xlsx",
        source_location="Sheet1 row 12",
        source_span="Refund window: 30 days",
    )


def _url(case) -> str:
    return reverse("datasets:case_edit", args=[case.dataset.agent_id, case.dataset_id, case.pk])


@pytest.mark.django_db
def test_htmx_get_shows_the_case_with_advanced_fields_open_and_provenance_read_only(client_alice, case, agent):
    document = Document.objects.create(
        team=agent.team, dataset=case.dataset, original_name="policy.pdf", file_type="pdf"
    )
    case.documents.add(document)

    html = client_alice.get(_url(case), **HTMX).content.decode()

    assert html.lstrip().startswith("<dialog data-autoopen")
    assert "How long is the refund window?" in html
    assert '<details class="advanced" open>' in html
    assert 'value="lookup_order"' in html and "{&quot;order_id&quot;: &quot;A-1&quot;}" in html
    assert 'value="refunds"' in html
    assert "Sheet1 row 12" in html and "Refund window: 30 days" in html
    assert 'name="source_span"' not in html and 'name="source_file"' not in html
    assert "policy.pdf" in html


@pytest.mark.django_db
def test_save_changes_the_case_and_refreshes_the_list(client_alice, case):
    data = {
        "question": "New question",
        "expected_answer": "New answer",
        "case_id": "refund-001",
        "tool_name": ["lookup_order", "refund"],
        "tool_args": ['{"order_id": "A-2"}', ""],
        "trajectory_mode": "superset",
        "tags": "",
    }

    response = client_alice.post(_url(case), data, **HTMX)

    case.refresh_from_db()
    assert case.question == "New question" and case.expected_answer == "New answer"
    assert case.expected_tools == [
        {"name": "lookup_order", "args": {"order_id": "A-2"}},
        {"name": "refund", "args": {}},
    ]
    assert case.trajectory_mode == "superset"
    assert case.turns == [] and case.tags == []
    assert case.source_file == "plan.xlsx"  # provenance is not editable
    assert "casesChanged" in response["HX-Trigger"]


@pytest.mark.django_db
def test_invalid_input_keeps_the_dialog_with_errors(client_alice, case):
    response = client_alice.post(_url(case), {"question": "", "trajectory_mode": "sideways"}, **HTMX)

    html = response.content.decode()
    assert "Write the question the agent should answer." in html
    assert "Select a valid choice." in html
    case.refresh_from_db()
    assert case.question == "How long is the refund window?"


@pytest.mark.django_db
def test_a_case_of_another_dataset_is_404(client_alice, case, agent):
    other = DatasetFactory(agent=agent)
    url = reverse("datasets:case_edit", args=[agent.pk, other.pk, case.pk])

    assert client_alice.get(url).status_code == 404


@pytest.mark.django_db
def test_outsider_gets_404_and_changes_nothing(client_charlie, case):
    assert client_charlie.post(_url(case), {"question": "Pwned"}).status_code == 404
    case.refresh_from_db()
    assert case.question == "How long is the refund window?"


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, case):
    assert client.get(_url(case)).status_code == 302


@pytest.mark.django_db
def test_plain_form_works_without_javascript(client_alice, case):
    page = client_alice.get(_url(case))
    response = client_alice.post(_url(case), {"question": "Plain edit", "trajectory_mode": "strict"})

    assert "<html" in page.content.decode()
    assert response.status_code == 302
    case.refresh_from_db()
    assert case.question == "Plain edit"


@pytest.mark.django_db
def test_put_is_not_allowed(client_alice, case):
    assert client_alice.put(_url(case)).status_code == 405
