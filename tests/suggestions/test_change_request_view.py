"""HTTP agents: Apply produces a Markdown change request to download, never a version."""

import pytest
from django.urls import reverse

from agents.models import Agent, AgentVersion
from suggestions.models import Suggestion
from tests.factories import AgentFactory
from tests.suggestions.conftest import PHONE, edit_post, suggestion

HTMX = {"HX-Request": "true"}


@pytest.fixture
def http_run(team, make_run):
    agent = AgentFactory(team=team, kind=Agent.Kind.HTTP, name="Deployed bot")
    return make_run([("fail", PHONE, "No idea.", 1), ("pass", "Yes.", "Yes.", 9)], agent=agent, average=5.0)


def _url(run):
    return reverse("suggestions:change_request", args=[run.agent_id, run.pk])


@pytest.mark.django_db
def test_the_dialog_offers_the_download_and_says_why(client_alice, http_run):
    suggestion(http_run, 0)

    html = client_alice.get(
        reverse("suggestions:apply", args=[http_run.agent_id, http_run.pk]), headers=HTMX
    ).content.decode()

    assert "This agent is an HTTP endpoint." in html
    assert "Download change request" in html
    assert f'action="{_url(http_run)}"' in html
    assert "hx-post" not in html  # a plain form post, so the browser downloads the file
    assert "Continue: review the change" not in html


@pytest.mark.django_db
def test_it_downloads_the_ticked_and_edited_suggestions_as_markdown(client_alice, http_run):
    first = suggestion(http_run, 0, title="Add the hotline", proposed_text="Phone: +1 555 0100.")
    first.cases.set([http_run.cases.get(position=0)])
    second = suggestion(http_run, 1, title="Be concise")
    data = edit_post([first, second], s0={"title": "Publish the hotline number"}, s1={"selected": False})

    response = client_alice.post(_url(http_run), data)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="change-request-run-{http_run.pk}.md"'
    markdown = response.content.decode()
    assert markdown.startswith("# Change request for Deployed bot")
    assert "## 1. Publish the hotline number" in markdown
    assert "> Phone: +1 555 0100." in markdown and "Motivating cases: #1" in markdown
    assert "Be concise" not in markdown
    assert Suggestion.objects.get(pk=first.pk).title == "Publish the hotline number"
    assert AgentVersion.objects.filter(agent=http_run.agent).count() == 1  # no version is made


@pytest.mark.django_db
def test_nothing_ticked_shows_the_form_again(client_alice, http_run):
    item = suggestion(http_run, 0)

    response = client_alice.post(_url(http_run), edit_post([item], s0={"selected": False}))

    assert response.status_code == 200
    assert "Select at least one suggestion to apply." in response.content.decode()
    assert "Content-Disposition" not in response


@pytest.mark.django_db
def test_http_agents_cannot_take_the_version_path(client_alice, http_run):
    item = suggestion(http_run, 0)

    response = client_alice.post(
        reverse("suggestions:apply", args=[http_run.agent_id, http_run.pk]), edit_post([item]), headers=HTMX
    )

    assert "download the change request instead" in response.content.decode()
    assert AgentVersion.objects.filter(agent=http_run.agent).count() == 1


@pytest.mark.django_db
def test_it_only_answers_post(client_alice, http_run):
    assert client_alice.get(_url(http_run)).status_code == 405


@pytest.mark.django_db
def test_outsiders_get_404(client_charlie, http_run):
    item = suggestion(http_run, 0)
    assert client_charlie.post(_url(http_run), edit_post([item])).status_code == 404


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_login(client, http_run):
    response = client.post(_url(http_run))
    assert response.status_code == 302 and response["Location"].startswith(reverse("accounts:login"))


@pytest.mark.django_db
def test_with_htmx_errors_come_back_as_the_step_alone(client_alice, http_run):
    item = suggestion(http_run, 0)

    response = client_alice.post(_url(http_run), edit_post([item], s0={"title": ""}), headers=HTMX)

    html = response.content.decode()
    assert "Give the suggestion a title" in html and "<html" not in html
