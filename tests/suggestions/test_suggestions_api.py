"""The suggestions API (suggestions/api.py): the panel and its job, Apply with edits (offline and
with the model's rewrite job), the review's diff and preview, confirm, the change request and
Verify; with the pages' validation and messages, team isolation and idempotency keys."""

import pytest
from django.urls import reverse

from accounts.services import api_token_create
from agents.models import AgentVersion
from runs.models import Run
from suggestions.models import PreviewJob, RewriteJob, Suggestion, SuggestionGeneration
from tests.suggestions.conftest import PHONE, suggestion

pytestmark = pytest.mark.django_db


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=alice, name='ci')[1]}"}


@pytest.fixture
def outsider(charlie):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=charlie, name='x')[1]}"}


@pytest.fixture
def two(failing_run):
    items = [
        suggestion(failing_run, 0, title="Add fact 0", proposed_text="Fact number 0."),
        suggestion(failing_run, 1, title="Add fact 1", proposed_text="Fact number 1."),
    ]
    items[0].cases.set([failing_run.cases.get(position=1)])
    return items


def _url(run, name, **kwargs):
    return reverse(f"api:suggestions_{name}", kwargs={"run_id": run.pk, **kwargs})


def _post(client, url, body, auth, **headers):
    return client.post(url, body, content_type="application/json", **auth, **headers)


# ---- the panel and the job -----------------------------------------------------------------------


def test_the_panel_lists_the_suggestions_with_their_cases(client, auth, failing_run, two):
    body = client.get(_url(failing_run, "panel"), **auth).json()

    assert body["state"] == "ready" and body["apply_blocker"] == ""
    assert [(s["title"], s["cases"], s["state"]) for s in body["suggestions"]] == [
        ("Add fact 0", [2], "proposed"),
        ("Add fact 1", [], "proposed"),
    ]
    assert [s["id"] for s in client.get(_url(failing_run, "list"), **auth).json()] == [two[0].pk, two[1].pk]


def test_generate_queues_one_job_per_run(client, auth, failing_run, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        first = _post(client, _url(failing_run, "generate"), {}, auth)
        second = _post(client, _url(failing_run, "generate"), {}, auth)

    assert first.status_code == second.status_code == 202
    assert first.json()["status"] == "queued"
    assert SuggestionGeneration.objects.filter(run=failing_run).count() == 1
    panel = client.get(_url(failing_run, "panel"), **auth).json()
    assert panel["state"] == "generating" and panel["generation"]["status"] == "queued"


def test_generate_refuses_a_run_that_needs_nothing_with_the_pages_message(client, auth, make_run):
    run = make_run([("pass", "A.", "A.", 9)], average=9)

    response = _post(client, _url(run, "generate"), {}, auth)

    assert response.status_code == 400
    assert response.json()["detail"] == "Every case passed with a good average score: there is nothing to suggest."
    assert client.get(_url(run, "panel"), **auth).json()["generation"] is None


# ---- Apply offline: step 1, the diff, confirm -------------------------------------------------------


def test_apply_saves_the_edits_and_answers_the_review_then_confirm_makes_the_version(
    client, auth, agent, failing_run, two, no_llm
):
    step1 = _post(client, _url(failing_run, "apply"), {"suggestions": [{"id": two[0].pk, "title": "Hotline"}]}, auth)

    assert step1.status_code == 200
    review = step1.json()
    assert review["suggestions"] == [two[0].pk] and review["base_version"] == 1
    (knowledge,) = review["fields"]
    assert knowledge["name"] == "knowledge" and knowledge["text"].endswith("Fact number 0.")
    assert {"kind": "add", "text": "Fact number 0."} in knowledge["diff"] and knowledge["leaks"] == []
    assert Suggestion.objects.get(pk=two[0].pk).title == "Hotline"

    edited = knowledge["text"].replace("Fact number 0.", "The hotline is +1 555 0100.")
    diff_body = {"suggestions": [two[0].pk], "base_version": 1, "field": "knowledge", "text": edited}
    diff = _post(client, _url(failing_run, "apply_diff"), diff_body, auth)
    assert diff.status_code == 200 and diff.json()["added"] >= 1
    assert {"kind": "add", "text": "The hotline is +1 555 0100."} in diff.json()["lines"]

    confirm = {"suggestions": [two[0].pk], "base_version": 1, "texts": {"knowledge": edited}}
    applied = _post(client, _url(failing_run, "apply_confirm"), confirm, auth, HTTP_IDEMPOTENCY_KEY="k1")
    again = _post(client, _url(failing_run, "apply_confirm"), confirm, auth, HTTP_IDEMPOTENCY_KEY="k1")

    assert applied.status_code == 201, applied.json()
    assert applied.json()["version"] == 2 and applied.json()["suggestions"] == [two[0].pk]
    assert applied.json()["message"].startswith("Saved as version 2.")
    assert again.status_code == 200 and again.json()["version"] == 2  # the same version, no third one
    assert AgentVersion.objects.filter(agent=agent).count() == 2
    agent.refresh_from_db()
    assert agent.current_version.knowledge.endswith("The hotline is +1 555 0100.")


def test_apply_without_a_choice_answers_the_pages_message(client, auth, failing_run, two, no_llm):
    response = _post(client, _url(failing_run, "apply"), {"suggestions": []}, auth)

    assert response.status_code == 400
    assert response.json()["detail"] == "Select at least one suggestion to apply."


def test_apply_refuses_an_empty_title_as_the_dialog_does(client, auth, failing_run, two, no_llm):
    response = _post(client, _url(failing_run, "apply"), {"suggestions": [{"id": two[0].pk, "title": " "}]}, auth)

    assert response.status_code == 400
    assert response.json()["detail"] == "Give the suggestion a title, or untick it."


def test_confirm_refuses_text_that_teaches_the_agent_its_test(client, auth, agent, failing_run, two, no_llm):
    leaked = agent.current_version.knowledge + "\n\n" + PHONE
    confirm = {"suggestions": [two[0].pk], "base_version": 1, "texts": {"knowledge": leaked}}

    response = _post(client, _url(failing_run, "apply_confirm"), confirm, auth, HTTP_IDEMPOTENCY_KEY="k2")

    assert response.status_code == 400
    assert response.json()["detail"].startswith(
        "This text would teach the agent its own test, so Verify could no longer tell whether it improved."
    )
    assert AgentVersion.objects.filter(agent=agent).count() == 1


def test_apply_with_everything_applied_says_so(client, auth, failing_run, two, no_llm):
    Suggestion.objects.filter(run=failing_run).update(state=Suggestion.State.APPLIED)

    response = _post(client, _url(failing_run, "apply"), {"suggestions": [{"id": two[0].pk}]}, auth)

    assert response.status_code == 409
    assert response.json()["detail"] == "Every suggestion of this run has been applied."


# ---- Apply with the model: the rewrite job, its actions, the preview ---------------------------


def test_with_a_model_apply_starts_one_rewrite_job_per_key(
    client, auth, failing_run, two, fake_llm, django_capture_on_commit_callbacks
):
    body = {"suggestions": [{"id": two[0].pk}, {"id": two[1].pk}]}
    with django_capture_on_commit_callbacks():
        first = _post(client, _url(failing_run, "apply"), body, auth, HTTP_IDEMPOTENCY_KEY="r1")
        second = _post(client, _url(failing_run, "apply"), body, auth, HTTP_IDEMPOTENCY_KEY="r1")

    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"] and RewriteJob.objects.count() == 1
    job = first.json()
    assert job["status"] == "queued" and [f["name"] for f in job["fields"]] == ["knowledge"]
    assert job["review"] is None
    polled = client.get(_url(failing_run, "apply_job", job_id=job["id"]), **auth).json()
    assert polled["status"] == "queued"

    keep = _post(client, _url(failing_run, "apply_job_action", job_id=job["id"]), {"action": "keep"}, auth)
    assert keep.status_code == 400 and keep.json()["detail"] == "Say which field keeps its text."
    cancel = _post(client, _url(failing_run, "apply_job_action", job_id=job["id"]), {"action": "cancel"}, auth)
    assert cancel.status_code == 200 and cancel.json()["status"] == "cancelled"


def test_a_preview_is_started_once_per_key(
    client, auth, agent, failing_run, two, fake_llm, django_capture_on_commit_callbacks
):
    text = agent.current_version.knowledge + "\n\nPhone support is available at +1 555 0100."
    body = {"suggestions": [two[0].pk], "base_version": 1, "texts": {"knowledge": text}}
    with django_capture_on_commit_callbacks():
        first = _post(client, _url(failing_run, "apply_preview"), body, auth, HTTP_IDEMPOTENCY_KEY="p1")
        second = _post(client, _url(failing_run, "apply_preview"), body, auth, HTTP_IDEMPOTENCY_KEY="p1")

    assert first.status_code == 202, first.json()
    assert second.status_code == 200 and second.json()["id"] == first.json()["id"]
    assert PreviewJob.objects.count() == 1
    polled = client.get(_url(failing_run, "apply_preview_job", preview_id=first.json()["id"]), **auth)
    assert polled.json()["status"] == "queued" and polled.json()["positions"] >= 1


def test_a_preview_needs_a_model(client, auth, agent, failing_run, two, no_llm):
    text = agent.current_version.knowledge + "\n\nNew line."
    body = {"suggestions": [two[0].pk], "base_version": 1, "texts": {"knowledge": text}}

    response = _post(client, _url(failing_run, "apply_preview"), body, auth)

    assert response.status_code == 400
    assert response.json()["detail"].startswith("A preview needs a model.")


# ---- the change request and Verify -----------------------------------------------------------


def test_the_change_request_is_the_markdown_of_the_chosen_suggestions(client, auth, failing_run, two):
    response = _post(client, _url(failing_run, "change_request"), {"suggestions": [{"id": two[1].pk}]}, auth)

    assert response.status_code == 200 and response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    assert "## 1. Add fact 1" in text and "Add fact 0" not in text


def test_verify_starts_one_run_per_key_and_refuses_an_unknown_version(client, auth, alice, failing_run, two, no_llm):
    from suggestions.services import suggestion_apply

    suggestion_apply(run=failing_run, user=alice, suggestions=[two[0]], fields={"knowledge": "Phone: 555 0100."})
    body = {"version": 2, "scope": "all"}

    first = _post(client, _url(failing_run, "verify"), body, auth, HTTP_IDEMPOTENCY_KEY="v1")
    second = _post(client, _url(failing_run, "verify"), body, auth, HTTP_IDEMPOTENCY_KEY="v1")
    unknown = _post(client, _url(failing_run, "verify"), {"version": 9}, auth)

    assert first.status_code == 201 and second.status_code == 200
    assert first.json()["id"] == second.json()["id"] and first.json()["purpose"] == "verify"
    assert Run.objects.filter(parent=failing_run, purpose=Run.Purpose.VERIFY).count() == 1
    assert unknown.status_code == 400
    assert unknown.json()["detail"] == "This agent has no version 9."


# ---- who may call ---------------------------------------------------------------------------------


POSTS = {
    "generate": {},
    "apply": {"suggestions": []},
    "apply_confirm": {"suggestions": [], "base_version": 1, "texts": {}},
    "apply_diff": {"suggestions": [], "base_version": 1, "field": "knowledge", "text": ""},
    "apply_preview": {"suggestions": [], "base_version": 1, "texts": {}},
    "change_request": {"suggestions": []},
    "verify": {"version": 1},
}


@pytest.mark.parametrize("name", sorted(POSTS))
def test_another_teams_run_is_a_404_and_no_token_a_401(client, outsider, failing_run, two, name):
    url = _url(failing_run, name)

    assert _post(client, url, POSTS[name], outsider).status_code == 404
    assert _post(client, url, POSTS[name], {}).status_code == 401


@pytest.mark.parametrize("name", ["panel", "list"])
def test_reads_of_another_teams_run_are_404(client, outsider, failing_run, name):
    assert client.get(_url(failing_run, name), **outsider).status_code == 404
    assert client.get(_url(failing_run, name)).status_code == 401


def test_another_teams_jobs_are_404(client, outsider, alice, failing_run, two, django_capture_on_commit_callbacks):
    from suggestions import rewrite

    with django_capture_on_commit_callbacks():
        job = rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=two)
    assert client.get(_url(failing_run, "apply_job", job_id=job.pk), **outsider).status_code == 404
    url = _url(failing_run, "apply_job_action", job_id=job.pk)
    assert _post(client, url, {"action": "cancel"}, outsider).status_code == 404
