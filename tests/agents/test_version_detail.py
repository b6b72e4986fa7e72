from django.urls import reverse

from agents import services
from tests.agents.conftest import SECRET


def _url(agent, version) -> str:
    return reverse("agents:version_detail", args=[agent.pk, version.pk])


def test_it_shows_an_old_versions_configuration_with_roll_back(client_alice, llm_agent, alice):
    v1 = llm_agent.current_version
    services.agent_update(agent=llm_agent, user=alice, instructions="Newer instructions")

    response = client_alice.get(_url(llm_agent, v1))

    assert response.status_code == 200
    assert "Version 1" in response.text
    assert "You are the refund helper." in response.text
    assert "Newer instructions" not in response.text
    assert reverse("agents:version_rollback", args=[llm_agent.pk, v1.pk]) in response.text


def test_the_current_version_offers_no_roll_back(client_alice, llm_agent):
    v1 = llm_agent.current_version
    response = client_alice.get(_url(llm_agent, v1))
    assert reverse("agents:version_rollback", args=[llm_agent.pk, v1.pk]) not in response.text


def test_header_values_are_not_shown(client_alice, http_agent):
    response = client_alice.get(_url(http_agent, http_agent.current_version))
    assert SECRET not in response.text


def test_another_agents_version_is_404(client_alice, llm_agent, agent):
    # Same team, wrong agent: the version must belong to the agent in the URL.
    assert client_alice.get(_url(llm_agent, agent.current_version)).status_code == 404


def test_outsiders_get_404(client_charlie, llm_agent):
    assert client_charlie.get(_url(llm_agent, llm_agent.current_version)).status_code == 404


def test_htmx_requests_get_the_page(client_alice, llm_agent):
    response = client_alice.get(_url(llm_agent, llm_agent.current_version), headers={"HX-Request": "true"})
    assert response.status_code == 200 and "Version 1" in response.text


def test_post_is_not_allowed(client_alice, llm_agent):
    assert client_alice.post(_url(llm_agent, llm_agent.current_version)).status_code == 405


def test_anonymous_users_are_sent_to_login(client, llm_agent):
    response = client.get(_url(llm_agent, llm_agent.current_version))
    assert response["Location"].startswith(reverse("accounts:login"))
