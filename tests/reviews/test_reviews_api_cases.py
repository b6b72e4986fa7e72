"""The API's "correct the case" of the review card (reviews/api_cases.py): the dataset's case
changes with a revision per field, the run keeps its copy; the page's messages; team isolation."""

import pytest
from django.urls import reverse

from accounts.services import api_token_create
from datasets.models import TestCase
from reviews.models import CaseEdit
from runs.models import RunCase
from tests.reviews.conftest import results_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=alice, name='ci')[1]}"}


@pytest.fixture
def outsider(charlie):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=charlie, name='x')[1]}"}


def _post(client, result, body, auth):
    url = reverse("api:reviews_case_correct", args=[result.run_id, result.pk])
    return client.post(url, body, content_type="application/json", **auth)


def test_correcting_the_case_changes_the_dataset_and_keeps_the_runs_copy(client, auth, ten_run):
    result = results_of(ten_run)[0]
    snapshot = RunCase.objects.filter(pk=result.case_id).values().get()

    response = _post(client, result, {"judge_guideline": "Accept 2 weeks."}, auth)

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["message"] == "The dataset's case is updated. This run keeps its copy."
    assert body["judge_guideline"] == "Accept 2 weeks." and body["revisions"] == 1
    source = TestCase.objects.get(pk=result.case.source_case_id)
    assert source.judge_guideline == "Accept 2 weeks." and source.expected_answer == result.case.expected_answer
    assert RunCase.objects.filter(pk=result.case_id).values().get() == snapshot
    assert [edit.field for edit in CaseEdit.objects.filter(case=source)] == ["judge_guideline"]


def test_the_same_correction_again_changes_nothing_with_the_pages_message(client, auth, ten_run):
    result = results_of(ten_run)[0]
    body = {"expected_answer": "Refunds within 14 days."}

    assert _post(client, result, body, auth).status_code == 200
    again = _post(client, result, body, auth)

    assert again.status_code == 400 and again.json()["detail"] == "Nothing changed: the case already says that."
    assert CaseEdit.objects.count() == 1


def test_a_deleted_case_cannot_be_corrected(client, auth, ten_run):
    result = results_of(ten_run)[0]
    TestCase.objects.filter(pk=result.case.source_case_id).delete()

    response = _post(client, result, {"expected_answer": "New"}, auth)

    assert response.status_code == 400
    assert response.json()["detail"] == "The case this result came from was deleted from its dataset."


def test_another_teams_result_is_a_404_and_no_token_a_401(client, outsider, ten_run):
    result = results_of(ten_run)[0]

    assert _post(client, result, {"expected_answer": "New"}, outsider).status_code == 404
    assert _post(client, result, {"expected_answer": "New"}, {}).status_code == 401
    assert not CaseEdit.objects.exists()
