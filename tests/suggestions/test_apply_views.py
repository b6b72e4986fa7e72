"""The Apply dialog: step 1 (tick and edit), step 2 (review the diff, edit the final text), confirm."""

import html
import re

import pytest
from django.urls import reverse

from agents.models import AgentVersion
from agents.services import agent_update
from suggestions.models import RewriteJob, Suggestion
from tests.suggestions.conftest import edit_post, suggestion

HTMX = {"HX-Request": "true"}


def _urls(run):
    args = [run.agent_id, run.pk]
    return {
        "apply": reverse("suggestions:apply", args=args),
        "confirm": reverse("suggestions:apply_confirm", args=args),
        "diff": reverse("suggestions:apply_diff", args=args),
    }


def _job_url(job):
    return reverse("suggestions:apply_job", args=[job.run.agent_id, job.run_id, job.pk])


@pytest.fixture
def three(failing_run):
    """Three offline knowledge suggestions on the failing run."""
    items = [suggestion(failing_run, i, title=f"Add fact {i}", proposed_text=f"Fact number {i}.") for i in range(3)]
    items[0].cases.set([failing_run.cases.get(position=1)])
    return items


def _confirm_post(review_html: str) -> dict:
    """The step-2 form as the browser would post it (hidden inputs and textareas)."""
    data: dict = {}
    for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', review_html):
        data.setdefault(name, []).append(html.unescape(value))
    for name, text in re.findall(
        r'<textarea id="apply-text-\w+" name="(\w+)"[^>]*>(.*?)</textarea>', review_html, re.S
    ):
        data[name] = html.unescape(text)
    data.pop("csrfmiddlewaretoken", None)
    return data


@pytest.mark.django_db
def test_the_dialog_lists_every_suggestion_ticked_and_editable(client_alice, failing_run, three):
    response = client_alice.get(_urls(failing_run)["apply"], headers={**HTMX, "HX-Target": "suggestion-dialog-slot"})

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith("<dialog") and "data-autoopen" in html and "<html" not in html
    assert html.count('type="checkbox"') == 3 and html.count("checked") == 3
    for item in three:
        assert f'value="{item.title}"' in html
    assert 'maxlength="200"' in html and 'maxlength="2000"' in html
    assert '<option value="guardrails">Guardrails</option>' in html
    assert "Continue: review the change" in html
    assert "From case #2" in html


@pytest.mark.django_db
def test_without_javascript_the_dialog_is_a_page(client_alice, failing_run, three):
    response = client_alice.get(_urls(failing_run)["apply"])

    assert response.status_code == 200
    assert "<html" in response.content.decode() and "Step 1 of 2" in response.content.decode()


@pytest.mark.django_db
def test_step_one_saves_the_edits_and_shows_the_diff_of_the_affected_fields(
    client_alice, agent, failing_run, three, no_llm
):
    data = edit_post(
        three,
        s0={"title": "Add the hotline", "description": "Callers need the number.\r\nSecond line."},
        s1={"selected": False},
        s2={"category": "guardrails", "title": "Never guess"},
    )

    response = client_alice.post(_urls(failing_run)["apply"], data, headers=HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert "Step 2 of 2" in html
    # The edits are saved as typed (line endings normalised), the unticked one untouched.
    first, second, third = (Suggestion.objects.get(pk=s.pk) for s in three)
    assert (first.title, first.description) == ("Add the hotline", "Callers need the number.\nSecond line.")
    assert second.title == "Add fact 1"
    assert (third.title, third.category) == ("Never guess", "guardrails")
    # One section per affected field: knowledge gains fact 0 only; guardrails gain fact 2.
    assert 'name="knowledge"' in html and 'name="guardrails"' in html and 'name="instructions"' not in html
    assert "Added: </span>Fact number 0." in html and "Fact number 1." not in html
    assert "Added: </span>Fact number 2." in html
    assert "do not use guardrails" in html  # a knowledge agent ignores them: said plainly
    assert f'name="base_version" value="{agent.current_version_id}"' in html
    assert "save as version 2" in html


@pytest.mark.django_db
def test_the_final_user_edited_text_is_what_lands_in_the_new_version(
    client_alice, alice, agent, failing_run, three, no_llm
):
    urls = _urls(failing_run)
    review = client_alice.post(
        urls["apply"], edit_post(three, s1={"selected": False}, s2={"selected": False}), headers=HTMX
    )
    data = _confirm_post(review.content.decode())
    assert "Fact number 0." in data["knowledge"]
    data["knowledge"] = data["knowledge"].replace("Fact number 0.", "The hotline is +1 555 0100.")

    response = client_alice.post(urls["confirm"], data, headers=HTMX)

    # The whole panel comes back in place of the old one (the open dialog leaves with it).
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#suggestions" and response["HX-Reswap"].startswith("outerHTML")
    assert "Saved as version 2." in response["HX-Trigger"]
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="suggestions"') and 'id="suggestion-dialog-slot"' in html
    assert "Version 2 was made from 1 suggestion" in html and "Verify v2" in html
    agent.refresh_from_db()
    version = agent.current_version
    assert version.number == 2 and version.created_by == alice
    assert version.knowledge.endswith("The hotline is +1 555 0100.")
    assert "Fact number 0." not in version.knowledge
    assert f"run #{failing_run.pk}" in version.note
    applied = Suggestion.objects.filter(run=failing_run, state=Suggestion.State.APPLIED)
    assert list(applied) == [three[0]]  # only the ticked one
    assert applied.get().applied_version == version


@pytest.mark.django_db
def test_without_javascript_confirm_redirects_to_the_run(client_alice, agent, failing_run, three, no_llm):
    urls = _urls(failing_run)
    review = client_alice.post(urls["apply"], edit_post(three))
    assert "<html" in review.content.decode()

    response = client_alice.post(urls["confirm"], _confirm_post(review.content.decode()))

    assert response.status_code == 302
    assert response["Location"].endswith(f"/runs/{failing_run.pk}/?tab=suggestions#suggestions")
    assert Suggestion.objects.filter(run=failing_run, state=Suggestion.State.APPLIED).count() == 3


@pytest.mark.django_db
def test_the_model_rewrites_the_field_for_the_preview(
    client_alice, agent, failing_run, three, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    fake_llm.add_rule(task="rewrite", json={"text": "Refunds within 30 days.\n\nHotline: +1 555 0100."})
    urls = _urls(failing_run)

    with django_capture_on_commit_callbacks(execute=True):
        started = client_alice.post(urls["apply"], edit_post(three), headers=HTMX)
        # The request answered before the model was asked anything: the rewrite is a job.
        assert fake_llm.count() == 0
    assert started.status_code == 200 and 'hx-trigger="every 3s"' in started.content.decode()
    job = RewriteJob.objects.get(run=failing_run)

    response = client_alice.get(_job_url(job), headers={**HTMX, "HX-Target": "apply-progress"})

    assert response.status_code == 286  # the poll stops: step 2 is here
    html = response.content.decode()
    assert "Step 2 of 2" in html
    assert "Added: </span>Hotline: +1 555 0100." in html
    assert "Removed: </span>Support is open 9-17 CET on weekdays." in html
    assert fake_llm.count(task="rewrite") == 1


@pytest.mark.django_db
def test_a_model_failure_during_the_rewrite_is_shown_in_the_dialog(
    client_alice, failing_run, three, fake_llm, settings, django_capture_on_commit_callbacks, tasks_run_here
):
    settings.EVALSITE_LLM_RETRIES = 0
    fake_llm.add_rule(task="rewrite", status=500)
    with django_capture_on_commit_callbacks(execute=True):
        client_alice.post(_urls(failing_run)["apply"], edit_post(three), headers=HTMX)
    job = RewriteJob.objects.get(run=failing_run)

    response = client_alice.get(_job_url(job), headers={**HTMX, "HX-Target": "apply-progress"})

    html = response.content.decode()
    assert response.status_code == 286 and "hx-trigger" not in html
    assert "The model could not rewrite the knowledge" in html
    assert "Try the knowledge again" in html and "Keep the original knowledge" in html


@pytest.mark.django_db
def test_bad_edits_are_shown_on_their_suggestion(client_alice, failing_run, three, no_llm):
    data = edit_post(three, s0={"title": ""}, s1={"description": "x" * 2001})

    response = client_alice.post(_urls(failing_run)["apply"], data, headers=HTMX)

    html = response.content.decode()
    assert "Step 1 of 2" in html
    assert "Give the suggestion a title, or untick it." in html
    assert "at most 2000 characters" in html
    assert Suggestion.objects.get(pk=three[0].pk).title == "Add fact 0"


@pytest.mark.django_db
def test_nothing_ticked_is_refused(client_alice, failing_run, three, no_llm):
    data = edit_post(three, s0={"selected": False}, s1={"selected": False}, s2={"selected": False})

    html = client_alice.post(_urls(failing_run)["apply"], data, headers=HTMX).content.decode()

    assert "Select at least one suggestion to apply." in html


@pytest.mark.django_db
def test_the_diff_follows_the_edited_text(client_alice, agent, failing_run, three):
    data = {"suggestions": [three[0].pk], "base_version": agent.current_version_id, "field": "knowledge",
            "knowledge": agent.current_version.knowledge + "\n\nA brand new line."}  # fmt: skip

    response = client_alice.post(_urls(failing_run)["diff"], data, headers=HTMX)

    assert response.status_code == 200
    assert "Added: </span>A brand new line." in response.content.decode()


@pytest.mark.django_db
def test_a_version_saved_since_the_preview_is_not_overwritten(client_alice, alice, agent, failing_run, three, no_llm):
    urls = _urls(failing_run)
    review = client_alice.post(urls["apply"], edit_post(three), headers=HTMX)
    agent_update(agent=agent, user=alice, instructions="Someone else's change.")

    response = client_alice.post(urls["confirm"], _confirm_post(review.content.decode()), headers=HTMX)

    assert "changed since this preview was made" in response.content.decode()
    assert AgentVersion.objects.filter(agent=agent).count() == 2  # only the other change
    assert not Suggestion.objects.filter(state=Suggestion.State.APPLIED).exists()


@pytest.mark.django_db
def test_confirming_twice_makes_one_version(client_alice, agent, failing_run, three, no_llm):
    urls = _urls(failing_run)
    data = _confirm_post(client_alice.post(urls["apply"], edit_post(three), headers=HTMX).content.decode())

    client_alice.post(urls["confirm"], data, headers=HTMX)
    again = client_alice.post(urls["confirm"], data, headers=HTMX)

    assert "Start again" in again.content.decode()
    assert AgentVersion.objects.filter(agent=agent).count() == 2


@pytest.mark.django_db
def test_back_from_step_two_keeps_the_ticked_choice(client_alice, failing_run, three):
    url = _urls(failing_run)["apply"] + f"?selected={three[0].pk}"

    response = client_alice.get(url, headers={**HTMX, "HX-Target": "apply-dialog-content"})

    html = response.content.decode()
    assert not html.lstrip().startswith("<dialog")  # the step alone, swapped into the open dialog
    assert html.count("checked") == 1


@pytest.mark.django_db
def test_with_everything_applied_the_dialog_says_so(client_alice, failing_run):
    suggestion(failing_run, 0, state=Suggestion.State.APPLIED)

    response = client_alice.get(_urls(failing_run)["apply"], headers=HTMX)

    assert response.status_code == 204
    assert "Every suggestion of this run has been applied." in response["HX-Trigger"]


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["apply", "confirm", "diff"])
def test_methods(client_alice, failing_run, three, name):
    url = _urls(failing_run)[name]
    assert client_alice.put(url).status_code == 405
    if name != "apply":
        assert client_alice.get(url).status_code == 405


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["apply", "confirm", "diff"])
def test_outsiders_get_404(client_charlie, failing_run, three, name):
    url = _urls(failing_run)[name]
    assert client_charlie.post(url, edit_post(three), headers=HTMX).status_code == 404
    assert not Suggestion.objects.filter(state=Suggestion.State.APPLIED).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["apply", "confirm", "diff"])
def test_anonymous_visitors_are_sent_to_login(client, failing_run, name):
    response = client.post(_urls(failing_run)[name])
    assert response.status_code == 302 and response["Location"].startswith(reverse("accounts:login"))


@pytest.mark.django_db
def test_suggestions_of_another_run_cannot_be_applied_here(client_alice, agent, make_run, failing_run, three, no_llm):
    other_run = make_run([("fail", "Fact.", "No.", 1)], average=1.0)
    foreign = suggestion(other_run, 0, title="Foreign")
    data = {"suggestions": [foreign.pk], "base_version": agent.current_version_id, "fields_changed": ["knowledge"],
            "knowledge": "Hijacked."}  # fmt: skip

    response = client_alice.post(_urls(failing_run)["confirm"], data, headers=HTMX)

    assert "Start again" in response.content.decode()
    agent.refresh_from_db()
    assert agent.current_version.number == 1
