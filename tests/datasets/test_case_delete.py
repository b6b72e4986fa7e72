"""Delete a test case (datasets:case_delete)."""

import pytest
from django.urls import reverse

from datasets.models import TestCase
from runs.models import Run, RunCase
from tests.factories import DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def case(agent):
    return TestCaseFactory(dataset=DatasetFactory(agent=agent), question="Delete me?")


def _url(case) -> str:
    return reverse("datasets:case_delete", args=[case.dataset.agent_id, case.dataset_id, case.pk])


@pytest.mark.django_db
def test_htmx_get_asks_for_confirmation(client_alice, case):
    html = client_alice.get(_url(case), **HTMX).content.decode()

    assert html.lstrip().startswith("<dialog data-autoopen")
    assert "Delete me?" in html


@pytest.mark.django_db
def test_delete_removes_the_case_but_not_a_runs_copy(client_alice, case, agent):
    run = Run.objects.create(agent=agent, agent_version=agent.current_version, dataset=case.dataset, dataset_name="x")
    RunCase.objects.create(run=run, position=0, source_case=case, question=case.question)

    response = client_alice.post(_url(case), **HTMX)

    assert not TestCase.objects.exists()
    assert RunCase.objects.get().question == "Delete me?"
    assert "casesChanged" in response["HX-Trigger"]
    assert response["HX-Retarget"] == "#dialog-slot"


@pytest.mark.django_db
def test_plain_form_works_without_javascript(client_alice, case):
    assert "<html" in client_alice.get(_url(case)).content.decode()
    assert client_alice.post(_url(case)).status_code == 302
    assert not TestCase.objects.exists()


@pytest.mark.django_db
def test_outsider_gets_404_and_deletes_nothing(client_charlie, case):
    assert client_charlie.post(_url(case)).status_code == 404
    assert TestCase.objects.exists()


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, case):
    assert client.post(_url(case)).status_code == 302
    assert TestCase.objects.exists()


@pytest.mark.django_db
def test_put_is_not_allowed(client_alice, case):
    assert client_alice.put(_url(case)).status_code == 405
