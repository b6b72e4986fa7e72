""" "Suggest changes" / "Try again" on the panel: queue the suggestion job of a completed run."""

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import Run
from suggestions.models import SuggestionGeneration
from tests.suggestions.conftest import REFUND

HTMX = {"HX-Request": "true"}


def _url(run):
    return reverse("suggestions:generate", args=[run.agent_id, run.pk])


@pytest.mark.django_db
def test_it_queues_the_job_and_the_panel_starts_polling(
    client_alice, alice, failing_run, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_alice.post(_url(failing_run), headers=HTMX)

    assert response.status_code == 200
    assert 'hx-trigger="every 3s"' in response.content.decode()
    assert "toast" in response["HX-Trigger"]
    generation = SuggestionGeneration.objects.get(run=failing_run)
    assert generation.status == SuggestionGeneration.Status.QUEUED and generation.requested_by == alice
    assert len(callbacks) == 1  # the task is sent once the row is committed


@pytest.mark.django_db
def test_without_htmx_it_redirects_to_the_run_page(client_alice, failing_run):
    response = client_alice.post(_url(failing_run))

    assert response.status_code == 302
    assert (
        response["Location"]
        == reverse("runs:detail", args=[failing_run.agent_id, failing_run.pk]) + "?tab=suggestions#suggestions"
    )


@pytest.mark.django_db
def test_a_clean_run_is_refused_with_a_reason(client_alice, make_run):
    run = make_run([("pass", REFUND, REFUND, 9)], average=9.0)

    response = client_alice.post(_url(run), headers=HTMX)

    assert "nothing to suggest" in response["HX-Trigger"]
    assert not SuggestionGeneration.objects.filter(run=run).exists()


@pytest.mark.django_db
def test_an_active_run_is_refused(client_alice, make_run):
    run = make_run([("fail", REFUND, "No.", 1)], status=Run.Status.RUNNING)

    response = client_alice.post(_url(run))

    assert response.status_code == 302
    assert not SuggestionGeneration.objects.filter(run=run).exists()


@pytest.mark.django_db
def test_a_double_click_queues_one_job(client_alice, failing_run, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        client_alice.post(_url(failing_run), headers=HTMX)
        client_alice.post(_url(failing_run), headers=HTMX)

    assert len(callbacks) == 1


@pytest.mark.django_db
def test_try_again_requeues_a_failed_job(client_alice, failing_run, django_capture_on_commit_callbacks):
    SuggestionGeneration.objects.create(
        run=failing_run, status=SuggestionGeneration.Status.FAILED, error="Timed out.", queued_at=timezone.now()
    )

    with django_capture_on_commit_callbacks() as callbacks:
        client_alice.post(_url(failing_run), headers=HTMX)

    generation = SuggestionGeneration.objects.get(run=failing_run)
    assert generation.status == SuggestionGeneration.Status.QUEUED and generation.error == ""
    assert len(callbacks) == 1


@pytest.mark.django_db
def test_it_only_answers_post(client_alice, failing_run):
    assert client_alice.get(_url(failing_run)).status_code == 405


@pytest.mark.django_db
def test_outsiders_get_404(client_charlie, failing_run):
    assert client_charlie.post(_url(failing_run), headers=HTMX).status_code == 404
    assert not SuggestionGeneration.objects.exists()


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_login(client, failing_run):
    response = client.post(_url(failing_run))
    assert response.status_code == 302 and response["Location"].startswith(reverse("accounts:login"))
