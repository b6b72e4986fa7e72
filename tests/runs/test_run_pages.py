"""The simple run list and run page (the review pages replace them later)."""

import pytest
from django.urls import reverse
from django_htmx.http import HTMX_STOP_POLLING

from runs import services
from runs.models import Result
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(make_dataset, agent, alice, no_llm):
    dataset = make_dataset(3, agent=agent)
    return services.run_start(agent=agent, dataset=dataset, user=alice)


def test_the_list_shows_each_run_with_its_counters(client_alice, run):
    drive(run)
    response = client_alice.get(reverse("runs:list", args=[run.agent_id]))
    body = response.content.decode()
    assert response.status_code == 200
    assert f'<span class="run-card-dataset">{run.dataset_name}</span>' in body
    assert "Completed" in body
    assert 'Passed</dt><dd class="green-text">3<' in body


def test_the_list_has_an_empty_state(client_alice, agent):
    body = client_alice.get(reverse("runs:list", args=[agent.pk])).content.decode()
    assert "No runs yet" in body


def test_the_run_page_shows_counters_and_results(client_alice, run):
    drive(run)
    body = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk])).content.decode()
    assert "Offline reference scorer" in body
    assert "Refunds are available within 30 days of purchase." in body
    assert body.count('class="badge badge-pass"') == 3
    assert 'hx-trigger="every 3s"' not in body


def test_an_active_run_polls_and_offers_stop(client_alice, run):
    body = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk])).content.decode()
    assert 'hx-trigger="every 3s"' in body
    assert reverse("runs:stop", args=[run.agent_id, run.pk]) in body


def test_polling_returns_the_fragment_while_active(client_alice, run):
    response = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="run-live"')
    assert 'hx-trigger="every 3s"' in body


def test_polling_stops_once_the_run_settled(client_alice, run):
    drive(run)
    response = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == HTMX_STOP_POLLING
    assert "hx-trigger" not in response.content.decode()


def test_result_text_is_escaped(client_alice, run):
    drive(run)
    Result.objects.filter(run=run).update(actual_answer='<script>alert(1)</script><b hx-get="/logout/">x</b>')
    body = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk])).content.decode()
    assert "<script>alert(1)" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


@pytest.mark.parametrize("name", ["runs:list", "runs:detail"])
def test_outsiders_get_404_and_anonymous_users_log_in(client_charlie, client, run, name):
    args = [run.agent_id] if name == "runs:list" else [run.agent_id, run.pk]
    assert client_charlie.get(reverse(name, args=args)).status_code == 404
    assert client.get(reverse(name, args=args))["Location"].startswith(reverse("accounts:login"))


@pytest.mark.parametrize("name", ["runs:list", "runs:detail"])
def test_the_pages_only_accept_get(client_alice, run, name):
    args = [run.agent_id] if name == "runs:list" else [run.agent_id, run.pk]
    assert client_alice.post(reverse(name, args=args)).status_code == 405
