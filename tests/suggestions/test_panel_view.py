"""The run page's "Suggested changes" panel: its states, and its poll."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent
from runs.models import Run
from suggestions.models import SuggestionGeneration
from suggestions.services import suggestion_apply
from tests.factories import AgentFactory
from tests.suggestions.conftest import REFUND, suggestion

HTMX = {"HX-Request": "true"}


def _url(run):
    return reverse("suggestions:panel", args=[run.agent_id, run.pk])


def _generation(run, status, **fields):
    return SuggestionGeneration.objects.create(run=run, status=status, queued_at=timezone.now(), **fields)


@pytest.mark.django_db
def test_ready_panel_lists_suggestions_with_badge_cases_and_offline_label(client_alice, failing_run):
    first = suggestion(failing_run, 0, title="Add the phone number", description="Phone: +1 555 0100.")
    first.cases.set([failing_run.cases.get(position=1)])
    suggestion(failing_run, 1, title="Be precise", category="instructions", offline=False)

    response = client_alice.get(_url(failing_run), headers=HTMX)

    assert response.status_code == 286  # nothing to wait for: the poll stops
    html = response.content.decode()
    assert 'id="suggestions-live"' in html and "hx-trigger" not in html
    assert "Add the phone number" in html and "Phone: +1 555 0100." in html
    assert 'badge-cat-knowledge">Knowledge<' in html and 'badge-cat-instructions">Instructions<' in html
    assert f'href="/agents/{failing_run.agent_id}/runs/{failing_run.pk}/#case-1"' in html and ">#2<" in html
    assert ">Offline<" in html
    assert "Apply to agent" in html
    assert "<html" not in html


@pytest.mark.django_db
def test_generating_panel_polls_every_three_seconds(client_alice, failing_run):
    _generation(failing_run, SuggestionGeneration.Status.RUNNING, offline=True)

    response = client_alice.get(_url(failing_run), headers=HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert 'hx-trigger="every 3s"' in html and f'hx-get="{_url(failing_run)}"' in html
    assert "Finding the facts that failing answers missed" in html


@pytest.mark.django_db
def test_finished_generation_stops_polling_and_shows_the_suggestions(client_alice, failing_run):
    _generation(failing_run, SuggestionGeneration.Status.DONE)
    suggestion(failing_run, 0, title="Add the phone number")

    response = client_alice.get(_url(failing_run), headers=HTMX)

    assert response.status_code == 286
    assert "hx-trigger" not in response.content.decode()
    assert "Add the phone number" in response.content.decode()


@pytest.mark.django_db
def test_an_active_run_says_suggestions_come_later_and_leaves_polling_to_the_run(client_alice, make_run):
    """The run page's own poll brings the panel once the run ends: two polls out of phase
    would show final suggestions next to "Running" and a Stop button for up to 3 s."""
    run = make_run([("pass", REFUND, REFUND, 9)], status=Run.Status.RUNNING)

    response = client_alice.get(_url(run), headers=HTMX)

    body = response.content.decode()
    assert "Suggestions appear here when the run finishes." in body
    assert "hx-trigger" not in body
    assert '<input type="hidden" id="suggestions-panel-state" name="panel" value="active">' in body


@pytest.mark.django_db
def test_a_clean_run_needs_no_suggestions(client_alice, make_run):
    run = make_run([("pass", REFUND, REFUND, 9)], average=9.0)

    response = client_alice.get(_url(run), headers=HTMX)

    assert response.status_code == 286
    assert "All cases passed — no suggestions" in response.content.decode()
    assert "Suggest changes" not in response.content.decode()


@pytest.mark.django_db
def test_a_run_that_completed_before_offers_suggest_changes(client_alice, failing_run):
    response = client_alice.get(_url(failing_run), headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 286
    assert "Suggest changes" in html
    assert f'hx-post="{reverse("suggestions:generate", args=[failing_run.agent_id, failing_run.pk])}"' in html


@pytest.mark.django_db
def test_a_failed_generation_shows_the_error_and_try_again(client_alice, failing_run):
    _generation(
        failing_run, SuggestionGeneration.Status.FAILED, error="The model could not suggest changes: timed out."
    )

    html = client_alice.get(_url(failing_run), headers=HTMX).content.decode()

    assert "The model could not suggest changes: timed out." in html
    assert "Try again" in html


@pytest.mark.django_db
def test_a_lost_generation_is_not_shown_as_generating_forever(client_alice, failing_run):
    generation = _generation(failing_run, SuggestionGeneration.Status.QUEUED)
    SuggestionGeneration.objects.filter(pk=generation.pk).update(queued_at=timezone.now() - timedelta(hours=1))

    response = client_alice.get(_url(failing_run), headers=HTMX)

    assert response.status_code == 286
    assert "taking much longer than expected" in response.content.decode()
    assert "Try again" in response.content.decode()


@pytest.mark.django_db
def test_a_stopped_run_has_no_suggestions(client_alice, make_run):
    run = make_run([("fail", REFUND, "No.", 1)], status=Run.Status.STOPPED)

    html = client_alice.get(_url(run), headers=HTMX).content.decode()

    assert "Suggestions come from completed runs; this run stopped." in html


@pytest.mark.django_db
def test_applied_suggestions_link_to_their_version_and_show_the_diff(client_alice, alice, failing_run):
    item = suggestion(failing_run, 0, title="Add the phone number")
    version = suggestion_apply(
        run=failing_run, user=alice, suggestions=[item], fields={"knowledge": "Phone: 555 0100."}
    )

    html = client_alice.get(_url(failing_run), headers=HTMX).content.decode()

    assert ">Applied<" in html
    assert reverse("agents:version_detail", args=[failing_run.agent_id, version.pk]) in html
    assert "Version 2 was made from 1 suggestion" in html
    assert "Phone: 555 0100." in html  # the diff's added line
    assert "Apply to agent" not in html  # nothing left to apply
    assert "Verify v2" in html


@pytest.mark.django_db
def test_http_agents_can_verify_without_a_version_being_made(client_alice, team, make_run):
    agent = AgentFactory(team=team, kind=Agent.Kind.HTTP)
    run = make_run([("fail", REFUND, "No.", 1)], agent=agent, average=1.0)
    suggestion(run, 0)

    html = client_alice.get(_url(run), headers=HTMX).content.decode()

    assert "produces a change request" in html
    assert "Verify the deployed change" in html


@pytest.mark.django_db
def test_model_text_is_shown_escaped_and_inert(client_alice, failing_run):
    suggestion(failing_run, 0, title="<script>alert(1)</script>", description='<img src=x hx-get="/logout/"> {{ 7*7 }}')

    html = client_alice.get(_url(failing_run), headers=HTMX).content.decode()

    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'hx-get="/logout/"' not in html
    assert "{{ 7*7 }}" in html and "49" not in html


@pytest.mark.django_db
def test_without_htmx_the_panel_is_a_page_of_its_own(client_alice, failing_run):
    suggestion(failing_run, 0, title="Add the phone number")

    response = client_alice.get(_url(failing_run))

    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and "Add the phone number" in html
    assert 'id="suggestion-dialog-slot"' in html


@pytest.mark.django_db
def test_the_panel_is_read_in_a_bounded_number_of_queries(client_alice, failing_run, django_assert_max_num_queries):
    for position in range(10):
        item = suggestion(failing_run, position)
        item.cases.set(failing_run.cases.all())

    with django_assert_max_num_queries(14):
        response = client_alice.get(_url(failing_run), headers=HTMX)
    assert response.status_code == 286


@pytest.mark.django_db
def test_it_only_answers_get(client_alice, failing_run):
    assert client_alice.post(_url(failing_run)).status_code == 405


@pytest.mark.django_db
def test_outsiders_get_404(client_charlie, failing_run):
    assert client_charlie.get(_url(failing_run), headers=HTMX).status_code == 404


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_login(client, failing_run):
    response = client.get(_url(failing_run))
    assert response.status_code == 302 and response["Location"].startswith(reverse("accounts:login"))


@pytest.mark.django_db
def test_an_empty_offline_result_explains_itself_without_a_pointless_retry(client_alice, failing_run, no_llm):
    _generation(failing_run, SuggestionGeneration.Status.DONE, offline=True)

    html = client_alice.get(_url(failing_run), headers=HTMX).content.decode()

    assert "Nothing to add." in html and "already in it" in html
    assert "Try again" not in html  # offline, it would find the same nothing


@pytest.mark.django_db
def test_an_empty_model_result_can_be_tried_again(client_alice, failing_run, fake_llm):
    _generation(failing_run, SuggestionGeneration.Status.DONE, offline=False)

    html = client_alice.get(_url(failing_run), headers=HTMX).content.decode()

    assert "The model found no change to suggest" in html and "Try again" in html


@pytest.mark.django_db
def test_http_agents_see_apply_disabled_with_the_reason_from_the_rule(client_alice, team, make_run):
    from suggestions.selectors import suggestion_apply_blocker

    agent = AgentFactory(team=team, kind=Agent.Kind.HTTP)
    run = make_run([("fail", REFUND, "No.", 1)], agent=agent, average=1.0)
    suggestion(run, 0)
    reason = suggestion_apply_blocker(agent=agent)

    html = client_alice.get(_url(run), headers=HTMX).content.decode()

    assert reason == "HTTP agents are configured elsewhere: download the change request instead."
    assert (
        f'<button class="btn" type="button" disabled title="{reason}" aria-describedby="apply-blocked-reason">'
        "Apply to agent</button>"
    ) in html
    assert 'id="apply-blocked-reason"' in html and reason in html
    # The change request stays one click away: the same dialog, in its HTTP mode.
    assert f'hx-get="{reverse("suggestions:apply", args=[agent.pk, run.pk])}"' in html
    assert "Write change request</a>" in html


@pytest.mark.django_db
def test_agents_evalsite_configures_get_an_enabled_apply(client_alice, failing_run):
    suggestion(failing_run, 0)

    html = client_alice.get(_url(failing_run), headers=HTMX).content.decode()

    assert 'aria-describedby="apply-blocked-reason"' not in html
    assert "Apply to agent</a>" in html
    assert 'id="apply-blocked-reason"' not in html
