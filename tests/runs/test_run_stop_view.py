import pytest
from django.urls import reverse

from runs import services
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(make_dataset, agent, alice, no_llm):
    dataset = make_dataset(4, agent=agent)
    return services.run_start(agent=agent, dataset=dataset, user=alice)


def _url(run):
    return reverse("runs:stop", args=[run.agent_id, run.pk])


def test_it_stops_the_run(client_alice, run):
    response = client_alice.post(_url(run), follow=True)
    run.refresh_from_db()
    assert run.status == Run.Status.STOPPED
    assert "Run stopped. Finished results are kept." in response.content.decode()


def test_htmx_gets_a_client_redirect(client_bob, run):
    response = client_bob.post(_url(run), HTTP_HX_REQUEST="true")
    assert response["HX-Redirect"] == reverse("runs:detail", args=[run.agent_id, run.pk])


def test_stopping_a_finished_run_says_so(client_alice, run):
    services.run_stop(run=run)
    response = client_alice.post(_url(run), follow=True)
    assert "already finished" in response.content.decode()


def test_it_only_accepts_post(client_alice, run):
    assert client_alice.get(_url(run)).status_code == 405


def test_an_outsider_gets_404(client_charlie, run):
    assert client_charlie.post(_url(run)).status_code == 404
    run.refresh_from_db()
    assert run.is_active


def test_anonymous_users_are_sent_to_log_in(client, run):
    assert client.post(_url(run))["Location"].startswith(reverse("accounts:login"))
