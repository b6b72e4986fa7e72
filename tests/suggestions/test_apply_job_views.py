"""The Apply dialog while the model rewrites: the progress step polls itself, Cancel stops the job,
a failed field is tried again or kept, and step 2 follows as before."""

import pytest
from django.urls import reverse

from agents.models import AgentVersion
from suggestions import rewrite
from suggestions.models import RewriteJob, Suggestion
from tests.suggestions.conftest import edit_post, suggestion
from tests.suggestions.test_apply_views import _confirm_post

HTMX = {"HX-Request": "true"}
POLL = {**HTMX, "HX-Target": "apply-progress"}
Field = RewriteJob.FieldStatus


@pytest.fixture
def three_fields(failing_run):
    return [
        suggestion(failing_run, 0, title="Add the hotline", category="knowledge"),
        suggestion(failing_run, 1, title="Never guess", category="guardrails"),
        suggestion(failing_run, 2, title="Be brief", category="other"),
    ]


@pytest.fixture
def job(failing_run, alice, three_fields, django_capture_on_commit_callbacks):
    """A queued job whose message has not reached a worker."""
    with django_capture_on_commit_callbacks():
        return rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=three_fields)


def _url(job, name="apply_job"):
    return reverse(f"suggestions:{name}", args=[job.run.agent_id, job.run_id, job.pk])


def _set_fields(job, *statuses, **changes):
    fields = [{**entry, "status": status} for entry, status in zip(job.fields, statuses, strict=True)]
    for entry in fields:
        if entry["status"] == Field.DONE:
            entry["text"] = entry["current"] + f"\nNew {entry['name']} line."
        if entry["status"] == Field.FAILED:
            entry["error"] = f"The model could not rewrite the {entry['name']}: the provider answered 500."
    RewriteJob.objects.filter(pk=job.pk).update(fields=fields, **changes)
    job.refresh_from_db()
    return job


@pytest.mark.django_db
def test_the_progress_step_polls_itself_and_says_where_the_rewrite_is(client_alice, job):
    _set_fields(job, Field.DONE, Field.RUNNING, Field.PENDING, status=RewriteJob.Status.RUNNING)

    response = client_alice.get(_url(job), headers=POLL)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="apply-progress"') and "<dialog" not in html
    assert f'hx-get="{_url(job)}"' in html and 'hx-trigger="every 3s"' in html and 'hx-swap="outerHTML"' in html
    assert "Rewriting the knowledge… 1 of 3 done" in html
    assert "✓ Rewritten" in html and "Waiting" in html
    assert "Cancel the rewrite" in html


@pytest.mark.django_db
def test_a_queued_job_names_its_first_field(client_alice, job):
    html = client_alice.get(_url(job), headers=POLL).content.decode()

    assert "Rewriting the instructions… 0 of 3 done" in html


@pytest.mark.django_db
def test_without_javascript_the_progress_is_a_page_with_refresh(client_alice, job):
    response = client_alice.get(_url(job))

    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert "Rewriting the instructions… 0 of 3 done" in html
    assert f'href="{_url(job)}">Refresh</a>' in html


@pytest.mark.django_db
def test_starting_without_javascript_redirects_to_the_progress_page(
    client_alice, failing_run, three_fields, fake_llm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks():
        response = client_alice.post(reverse("suggestions:apply", args=[failing_run.agent_id, failing_run.pk]),
                                     edit_post(three_fields))  # fmt: skip

    job = RewriteJob.objects.get(run=failing_run)
    assert response.status_code == 302 and response["Location"] == _url(job)
    assert fake_llm.count() == 0


@pytest.mark.django_db
def test_a_rewritten_job_answers_step_two_and_stops_the_poll(client_alice, agent, job):
    _set_fields(job, Field.DONE, Field.DONE, Field.KEPT, status=RewriteJob.Status.DONE)

    response = client_alice.get(_url(job), headers=POLL)

    assert response.status_code == 286
    html = response.content.decode()
    assert html.lstrip().startswith("<form") and "Step 2 of 2" in html and 'hx-trigger="every' not in html
    assert 'name="instructions"' in html and 'name="knowledge"' in html and 'name="guardrails"' not in html
    assert "Added: </span>New knowledge line." in html
    assert f'name="base_version" value="{agent.current_version_id}"' in html


@pytest.mark.django_db
def test_step_two_after_the_job_saves_the_new_version(
    client_alice, agent, failing_run, three_fields, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    fake_llm.add_rule(task="rewrite", handler=lambda r: {"json": {"text": r["messages"][1]["content"].split(
        ":\n", 1)[1].split("\n\nChanges to make:")[0] + "\nAdded by the model."}})  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        client_alice.post(reverse("suggestions:apply", args=[agent.pk, failing_run.pk]), edit_post(three_fields),
                          headers=HTMX)  # fmt: skip
    review = client_alice.get(_url(RewriteJob.objects.get(run=failing_run)), headers=POLL)

    confirm = reverse("suggestions:apply_confirm", args=[agent.pk, failing_run.pk])
    response = client_alice.post(confirm, _confirm_post(review.content.decode()), headers=HTMX)

    assert response.status_code == 200 and "Saved as version 2." in response["HX-Trigger"]
    agent.refresh_from_db()
    assert agent.current_version.number == 2
    assert agent.current_version.knowledge.endswith("Added by the model.")
    assert agent.current_version.guardrails == "Added by the model."
    assert Suggestion.objects.filter(state=Suggestion.State.APPLIED).count() == 3


@pytest.mark.django_db
def test_cancel_stops_the_job_and_says_nothing_changed(client_alice, job):
    response = client_alice.post(_url(job, "apply_job_action"), {"action": "cancel"}, headers=HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert "The rewrite was cancelled. Nothing was changed." in html and "hx-trigger" not in html
    assert html.count("Not rewritten") == 3
    assert "← Back" in html and "Try again" in html
    job.refresh_from_db()
    assert job.status == RewriteJob.Status.CANCELLED
    # The next poll (one may be in flight) stops.
    assert client_alice.get(_url(job), headers=POLL).status_code == 286


@pytest.mark.django_db
def test_a_failed_field_shows_its_message_with_try_again_and_keep(client_alice, job):
    _set_fields(job, Field.DONE, Field.FAILED, Field.DONE, status=RewriteJob.Status.DONE)

    response = client_alice.get(_url(job), headers=POLL)

    assert response.status_code == 286
    html = response.content.decode()
    assert "The model could not rewrite the knowledge: the provider answered 500." in html
    assert "Try the knowledge again" in html and "Keep the original knowledge" in html
    assert "Step 2 of 2" not in html


@pytest.mark.django_db
def test_keeping_the_failed_field_moves_on_to_step_two(client_alice, job):
    _set_fields(job, Field.DONE, Field.FAILED, Field.DONE, status=RewriteJob.Status.DONE)

    response = client_alice.post(_url(job, "apply_job_action"), {"action": "keep", "field": "knowledge"}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200 and "Step 2 of 2" in html
    assert 'name="knowledge"' not in html and 'name="guardrails"' in html and 'name="instructions"' in html
    # The kept field's suggestion is not part of what step 2 applies.
    hotline = Suggestion.objects.get(title="Add the hotline")
    assert f'name="suggestions" value="{hotline.pk}"' not in html
    assert "Applying 2 suggestions" in html


@pytest.mark.django_db
def test_trying_a_field_again_queues_it_and_polls_again(client_alice, job, django_capture_on_commit_callbacks):
    _set_fields(job, Field.DONE, Field.FAILED, Field.DONE, status=RewriteJob.Status.DONE)

    with django_capture_on_commit_callbacks() as callbacks:
        response = client_alice.post(
            _url(job, "apply_job_action"), {"action": "retry", "field": "knowledge"}, headers=HTMX
        )

    html = response.content.decode()
    assert 'hx-trigger="every 3s"' in html and "Rewriting the knowledge… 2 of 3 done" in html
    assert len(callbacks) == 1
    job.refresh_from_db()
    assert job.status == RewriteJob.Status.QUEUED and job.fields[1]["status"] == Field.PENDING


@pytest.mark.django_db
def test_a_refused_action_is_explained_in_the_dialog(client_alice, job):
    response = client_alice.post(_url(job, "apply_job_action"), {"action": "keep", "field": "knowledge"}, headers=HTMX)

    assert "The rewrite is still going: wait for it to finish." in response.content.decode()


@pytest.mark.django_db
def test_an_action_without_javascript_redirects_back_to_the_progress_page(client_alice, job):
    response = client_alice.post(_url(job, "apply_job_action"), {"action": "cancel"})

    assert response.status_code == 302 and response["Location"] == _url(job)


@pytest.mark.django_db
def test_a_job_of_another_run_is_404(client_alice, job, make_run):
    other = make_run([("fail", "Fact.", "No.", 1)], average=1.0)
    url = reverse("suggestions:apply_job", args=[other.agent_id, other.pk, job.pk])

    assert client_alice.get(url).status_code == 404
    assert client_alice.post(url.replace("/jobs/", "/jobs/") + "action/", {"action": "cancel"}).status_code == 404
    job.refresh_from_db()
    assert job.status == RewriteJob.Status.QUEUED


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["apply_job", "apply_job_action"])
def test_methods_outsiders_and_anonymous_visitors(client, client_alice, client_charlie, job, name):
    url = _url(job, name)
    assert client_alice.put(url).status_code == 405
    assert client_charlie.get(url).status_code in (404, 405)
    assert client_charlie.post(url, {"action": "cancel"}).status_code in (404, 405)
    assert client.post(url).status_code == 302 and client.get(url).status_code == 302
    job.refresh_from_db()
    assert job.status == RewriteJob.Status.QUEUED
    assert AgentVersion.objects.count() == 1
