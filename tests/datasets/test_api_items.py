"""JSON API: a dataset's test cases (/api/agents/{agent_id}/eval/datasets/{id}/items)."""

import pytest
from django.test import Client

from accounts.services import api_token_create
from datasets.models import TestCase
from tests.factories import DatasetFactory, TestCaseFactory


def _api(user) -> Client:
    _token, raw = api_token_create(user=user, name="ci")
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


def _url(dataset, item_id: int | None = None) -> str:
    base = f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}/items"
    return base if item_id is None else f"{base}/{item_id}"


ITEM = {
    "question": "Cancel order A-7",
    "expected_answer": "Order A-7 is cancelled.",
    "case_id": "cancel-7",
    "turns": [{"user": "Hi, I need help with an order."}],
    "expected_tools": [{"name": "cancel_order", "args": {"order_id": "A-7"}}],
    "trajectory_mode": "superset",
    "check_tool_args": True,
    "expected_context": ["Orders can be cancelled before shipping."],
    "tags": ["orders"],
    "smoke_count": 2,
}


@pytest.mark.django_db
def test_create_a_dataset_and_items_with_a_token(alice, agent):
    api = _api(alice)
    created = api.post(f"/api/agents/{agent.pk}/eval/datasets", {"name": "API set"}, content_type="application/json")
    dataset_id = created.json()["id"]
    items_url = f"/api/agents/{agent.pk}/eval/datasets/{dataset_id}/items"

    first = api.post(items_url, ITEM, content_type="application/json")
    second = api.post(items_url, {"question": "Just a question"}, content_type="application/json")

    assert first.status_code == 201 and second.status_code == 201
    body = first.json()
    assert body["case_id"] == "cancel-7"
    assert body["turns"] == [{"user": "Hi, I need help with an order.", "expected": ""}]
    assert body["expected_tools"] == [{"name": "cancel_order", "args": {"order_id": "A-7"}}]
    assert body["trajectory_mode"] == "superset" and body["check_tool_args"] is True
    assert body["documents"] == [] and body["smoke_count"] == 2
    assert second.json()["position"] == body["position"] + 1
    assert api.get(f"/api/agents/{agent.pk}/eval/datasets/{dataset_id}").json()["case_count"] == 2


@pytest.mark.django_db
def test_item_validation_errors_name_their_field(alice, dataset):
    TestCaseFactory(dataset=dataset, case_id="cancel-7")
    api = _api(alice)

    duplicate = api.post(_url(dataset), ITEM, content_type="application/json")
    empty = api.post(_url(dataset), {"question": "  "}, content_type="application/json")
    bad_mode = api.post(_url(dataset), {"question": "q", "trajectory_mode": "fuzzy"}, content_type="application/json")
    bad_smoke = api.post(_url(dataset), {"question": "q", "smoke_count": 11}, content_type="application/json")

    assert duplicate.status_code == 422
    assert duplicate.json()["detail"][0]["loc"] == ["body", "payload", "case_id"]
    assert empty.json()["detail"] == [
        {
            "type": "value_error",
            "loc": ["body", "payload", "question"],
            "msg": "Write the question the agent should answer.",
        }
    ]
    assert bad_mode.status_code == 422 and bad_mode.json()["detail"][0]["loc"][-1] == "trajectory_mode"
    assert bad_smoke.status_code == 422 and bad_smoke.json()["detail"][0]["loc"][-1] == "smoke_count"
    assert TestCase.objects.count() == 1


@pytest.mark.django_db
def test_list_is_paginated_in_dataset_order_and_searchable(alice, dataset):
    for index in range(5):
        TestCaseFactory(dataset=dataset, position=10 - index, question=f"Question {index}", expected_answer="")

    page = _api(alice).get(_url(dataset), {"limit": 2}).json()
    found = _api(alice).get(_url(dataset), {"q": "question 3"}).json()

    assert page["count"] == 5
    assert [item["question"] for item in page["items"]] == ["Question 4", "Question 3"]
    assert [item["question"] for item in found["items"]] == ["Question 3"]


@pytest.mark.django_db
def test_get_patch_and_delete_an_item(alice, dataset):
    case = TestCaseFactory(dataset=dataset, question="Before", expected_answer="Keep me", smoke_count=3)
    api = _api(alice)

    assert api.get(_url(dataset, case.pk)).json()["question"] == "Before"
    patched = api.patch(
        _url(dataset, case.pk),
        {"question": "After", "tags": ["x"], "smoke_count": None},
        content_type="application/json",
    )
    assert patched.status_code == 200
    assert patched.json()["question"] == "After" and patched.json()["tags"] == ["x"]
    case.refresh_from_db()
    assert case.expected_answer == "Keep me" and case.smoke_count is None

    assert api.delete(_url(dataset, case.pk)).status_code == 204
    assert not TestCase.objects.exists()


@pytest.mark.django_db
def test_another_teams_token_gets_404_for_items(charlie, dataset):
    case = TestCaseFactory(dataset=dataset, question="Private")
    api = _api(charlie)

    assert api.get(_url(dataset)).status_code == 404
    assert api.post(_url(dataset), {"question": "Injected"}, content_type="application/json").status_code == 404
    assert api.get(_url(dataset, case.pk)).status_code == 404
    assert api.patch(_url(dataset, case.pk), {"question": "Pwned"}, content_type="application/json").status_code == 404
    assert api.delete(_url(dataset, case.pk)).status_code == 404
    case.refresh_from_db()
    assert case.question == "Private" and TestCase.objects.count() == 1


@pytest.mark.django_db
def test_an_item_of_another_dataset_is_404(alice, dataset, agent):
    other = TestCaseFactory(dataset=DatasetFactory(agent=agent))

    assert _api(alice).get(_url(dataset, other.pk)).status_code == 404


@pytest.mark.django_db
def test_item_list_queries_are_bounded(alice, dataset, django_assert_max_num_queries):
    TestCase.objects.bulk_create(TestCase(dataset=dataset, position=i, question=f"Q{i}") for i in range(100))
    api = _api(alice)

    with django_assert_max_num_queries(8):
        body = api.get(_url(dataset), {"limit": 100}).json()

    assert len(body["items"]) == 100


@pytest.mark.django_db
def test_item_positions_are_the_1_based_numbers_the_page_shows(alice, dataset):
    # Gaps left by a delete, and a search, keep each case's number in the dataset.
    first, second, third = (TestCaseFactory(dataset=dataset, position=p, question=f"Q{p}") for p in (0, 4, 9))
    api = _api(alice)
    listed = api.get(_url(dataset)).json()["items"]
    assert [(item["id"], item["position"]) for item in listed] == [(first.pk, 1), (second.pk, 2), (third.pk, 3)]
    found = api.get(_url(dataset), {"q": "Q9"}).json()["items"]
    assert [item["position"] for item in found] == [3]
    assert api.get(_url(dataset, second.pk)).json()["position"] == 2
    created = api.post(_url(dataset), {"question": "New"}, content_type="application/json").json()
    assert created["position"] == 4


@pytest.mark.django_db
def test_unknown_fields_in_an_item_body_are_a_422(alice, dataset):
    api = _api(alice)
    response = api.post(_url(dataset), {"question": "Q", "expected": "typo"}, content_type="application/json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "expected"
    assert not TestCase.objects.filter(dataset=dataset).exists()
    case = TestCaseFactory(dataset=dataset)
    patched = api.patch(_url(dataset, case.pk), {"answer": "x"}, content_type="application/json")
    assert patched.status_code == 422


def test_an_item_gives_its_source_apart_from_its_attachments(alice, agent, dataset):
    from datasets.models import Document

    plan = Document.objects.create(team=agent.team, dataset=dataset, original_name="plan.xlsx", file_type="xlsx")
    invoice = Document.objects.create(team=agent.team, dataset=dataset, original_name="inv.pdf", file_type="pdf")
    case = TestCaseFactory(
        dataset=dataset, source_document=plan, source_file="plan.xlsx", source_location="Plan row 3", source_span="Q?"
    )
    case.documents.add(invoice)
    plain = TestCaseFactory(dataset=dataset)

    body = _api(alice).get(_url(dataset, case.pk)).json()

    assert [document["name"] for document in body["documents"]] == ["inv.pdf"]
    assert body["source"] == {
        "document": {"id": plan.pk, "name": "plan.xlsx", "file_type": "xlsx", "size": 0},
        "file": "plan.xlsx",
        "location": "Plan row 3",
        "span": "Q?",
    }
    assert _api(alice).get(_url(dataset, plain.pk)).json()["source"] is None
    listed = _api(alice).get(f"/api/agents/{agent.pk}/eval/datasets/{dataset.pk}").json()
    assert listed["agent_reads_source"] is False and listed["eval_set_id"] == ""
