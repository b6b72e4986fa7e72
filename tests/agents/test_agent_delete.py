from django.urls import reverse

from agents.models import Agent
from runs.models import Run


def _url(agent) -> str:
    return reverse("agents:delete", args=[agent.pk])


def test_get_shows_a_confirmation_page_with_what_will_be_lost(client_alice, agent):
    response = client_alice.get(_url(agent))

    assert response.status_code == 200
    assert "Delete Support bot?" in response.text
    assert "1 version" in response.text
    assert "<html" in response.text


def test_htmx_get_returns_the_dialog_only(client_alice, agent):
    response = client_alice.get(_url(agent), headers={"HX-Request": "true"})

    assert response.text.lstrip().startswith("<dialog")
    assert "data-autoopen" in response.text


def test_post_deletes_and_goes_to_the_list(client_alice, agent):
    response = client_alice.post(_url(agent))

    assert response.status_code == 302
    assert response["Location"] == reverse("agents:list")
    assert not Agent.objects.filter(pk=agent.pk).exists()


def test_htmx_post_redirects_the_client(client_alice, agent):
    response = client_alice.post(_url(agent), headers={"HX-Request": "true"})

    assert response["HX-Redirect"] == reverse("agents:list")
    assert not Agent.objects.filter(pk=agent.pk).exists()


def test_a_refusal_is_shown_in_the_dialog(client_alice, agent):
    Run.objects.create(agent=agent, agent_version=agent.current_version, dataset_name="d", status=Run.Status.RUNNING)

    response = client_alice.post(_url(agent), headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert "Stop it or let it finish" in response.text
    assert Agent.objects.filter(pk=agent.pk).exists()


def test_outsiders_get_404_and_delete_nothing(client_charlie, agent):
    assert client_charlie.get(_url(agent)).status_code == 404
    assert client_charlie.post(_url(agent)).status_code == 404
    assert Agent.objects.filter(pk=agent.pk).exists()


def test_put_is_not_allowed(client_alice, agent):
    assert client_alice.put(_url(agent)).status_code == 405


def test_anonymous_users_are_sent_to_login(client, agent):
    response = client.post(_url(agent))
    assert response["Location"].startswith(reverse("accounts:login"))
    assert Agent.objects.filter(pk=agent.pk).exists()
