"""The runs tab: cards, search, and one poll for the whole list."""

import re

import pytest
from django.urls import reverse
from django_htmx.http import HTMX_STOP_POLLING

from runs.models import Run
from tests.factories import DatasetFactory
from tests.runs.review_helpers import XSS, CaseSpec, build_run

pytestmark = pytest.mark.django_db


def _list(agent):
    return reverse("runs:list", args=[agent.pk])


def _poll(agent):
    return reverse("runs:list_poll", args=[agent.pk])


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent, name="Refund policy")


def test_cards_show_newest_first_with_their_figures(client_alice, agent, dataset):
    old = build_run(
        agent=agent, dataset=dataset, cases=[CaseSpec(repeats=[("pass", 9.0)]), CaseSpec(repeats=[("fail", 2.0)])]
    )
    new = build_run(agent=agent, dataset=DatasetFactory(agent=agent, name="Billing"), cases=[CaseSpec()])

    body = client_alice.get(_list(agent)).content.decode()

    assert body.index(f'id="run-{new.pk}"') < body.index(f'id="run-{old.pk}"')
    card = body[body.index(f'id="run-{old.pk}"') :]
    assert "Refund policy" in card
    assert "Version 1" in card
    assert 'class="badge badge-completed">Completed' in card
    assert re.search(r"Passed</dt><dd class=\"green-text\">1<", card)
    assert re.search(r"Failed</dt><dd class=\"red-text\">1<", card)
    assert "5.5" in card  # average of 9 and 2
    assert "Took" in card


def test_a_running_card_has_a_spinner_and_a_progress_bar(client_alice, agent, dataset):
    run = build_run(
        agent=agent,
        dataset=dataset,
        status=Run.Status.RUNNING,
        cases=[CaseSpec(), CaseSpec(repeats=[("running", None)]), CaseSpec(repeats=[("pending", None)])],
    )
    body = client_alice.get(_list(agent)).content.decode()
    card = body[body.index(f'id="run-{run.pk}"') :]
    assert '<span class="spinner" aria-hidden="true"></span> Running' in card
    assert 'role="progressbar"' in card
    assert "1 / 3" in card


def test_a_failed_card_shows_its_error(client_alice, agent, dataset):
    build_run(agent=agent, dataset=dataset, status=Run.Status.FAILED, error="The agent has no knowledge.", cases=[])
    body = client_alice.get(_list(agent)).content.decode()
    assert "badge-failed" in body
    assert "The agent has no knowledge." in body


def test_search_matches_dataset_names_and_statuses(client_alice, agent, dataset):
    refunds = build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    billing = build_run(agent=agent, dataset=DatasetFactory(agent=agent, name="Billing"), cases=[CaseSpec()])
    stopped = build_run(
        agent=agent,
        dataset=DatasetFactory(agent=agent, name="Onboarding"),
        status=Run.Status.STOPPED,
        cases=[CaseSpec()],
    )

    by_name = client_alice.get(_list(agent), {"q": "refund"}).content.decode()
    by_status = client_alice.get(_list(agent), {"q": "stopp"}).content.decode()

    assert f'id="run-{refunds.pk}"' in by_name and f'id="run-{billing.pk}"' not in by_name
    assert f'id="run-{stopped.pk}"' in by_status and f'id="run-{refunds.pk}"' not in by_status


def test_a_search_without_matches_says_so(client_alice, agent, dataset):
    build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    body = client_alice.get(_list(agent), {"q": "nothing like it"}).content.decode()
    assert "No runs match “nothing like it”" in body


def test_the_empty_state_leads_to_the_datasets(client_alice, agent):
    body = client_alice.get(_list(agent)).content.decode()
    assert "No runs yet" in body
    assert reverse("datasets:list", args=[agent.pk]) in body


def test_htmx_search_returns_the_cards_only(client_alice, agent, dataset):
    build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    response = client_alice.get(_list(agent), {"q": "refund"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="run-cards-region"')
    assert "<html" not in body


def test_the_list_polls_once_for_all_active_runs(client_alice, agent, dataset):
    active = [
        build_run(
            agent=agent, dataset=dataset, status=Run.Status.RUNNING, cases=[CaseSpec(repeats=[("running", None)])]
        )
        for _ in range(3)
    ]
    build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])

    body = client_alice.get(_list(agent)).content.decode()

    assert body.count('hx-trigger="every 3s"') == 1
    poller = re.search(r'<div id="runs-poll"[^>]*hx-get="([^"]+)"', body).group(1).replace("&amp;", "&")
    assert all(str(run.pk) in poller for run in active)


def test_nothing_polls_when_nothing_runs(client_alice, agent, dataset):
    build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    body = client_alice.get(_list(agent)).content.decode()
    assert "every 3s" not in body
    assert '<div id="runs-poll" class="runs-poll" aria-hidden="true"></div>' in body


def test_the_poll_refreshes_active_cards_and_keeps_polling(client_alice, agent, dataset):
    run = build_run(
        agent=agent, dataset=dataset, status=Run.Status.RUNNING, cases=[CaseSpec(repeats=[("running", None)])]
    )
    response = client_alice.get(_poll(agent), {"ids": str(run.pk)}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert f'<li id="run-{run.pk}" class="run-card run-card-running" hx-swap-oob="true">' in body
    assert 'hx-trigger="every 3s"' in body


def test_the_poll_stops_when_nothing_runs(client_alice, agent, dataset):
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])  # finished since the page loaded
    response = client_alice.get(_poll(agent), {"ids": str(run.pk)}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == HTMX_STOP_POLLING
    assert "hx-trigger" not in body
    assert f'<li id="run-{run.pk}" class="run-card run-card-completed" hx-swap-oob="true">' in body


def test_the_poll_adds_runs_started_since_at_the_top(client_alice, agent, dataset):
    first = build_run(
        agent=agent, dataset=dataset, status=Run.Status.RUNNING, cases=[CaseSpec(repeats=[("running", None)])]
    )
    second = build_run(
        agent=agent, dataset=dataset, status=Run.Status.PENDING, cases=[CaseSpec(repeats=[("pending", None)])]
    )
    body = client_alice.get(
        _poll(agent), {"ids": str(first.pk), "newest": str(first.pk)}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert '<div hx-swap-oob="afterbegin:#run-cards">' in body
    assert f'id="run-{second.pk}"' in body
    assert f"newest={second.pk}" in body


def test_the_poll_never_shows_another_agents_runs(client_alice, agent, team, dataset):
    from tests.factories import AgentFactory

    other = AgentFactory(team=team)
    foreign = build_run(agent=other, dataset=DatasetFactory(agent=other), status=Run.Status.RUNNING, cases=[])
    body = client_alice.get(
        _poll(agent), {"ids": str(foreign.pk), "newest": "0"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert f"run-{foreign.pk}" not in body


def test_card_text_is_escaped(client_alice, agent):
    build_run(
        agent=agent, dataset=DatasetFactory(agent=agent, name=XSS[:120]), status=Run.Status.FAILED, error=XSS, cases=[]
    )
    body = client_alice.get(_list(agent)).content.decode()
    assert "<script>alert" not in body
    assert "&lt;script&gt;alert" in body


@pytest.mark.parametrize("name", ["runs:list", "runs:list_poll"])
def test_only_get_is_allowed(client_alice, agent, name):
    assert client_alice.post(reverse(name, args=[agent.pk])).status_code == 405


@pytest.mark.parametrize("name", ["runs:list", "runs:list_poll"])
def test_outsiders_get_404_and_anonymous_visitors_log_in(client_charlie, client, agent, name):
    url = reverse(name, args=[agent.pk])
    assert client_charlie.get(url).status_code == 404
    assert client.get(url)["Location"].startswith(reverse("accounts:login"))
