from django.urls import reverse

from agents import services


def _url(agent, version) -> str:
    return reverse("agents:version_rollback", args=[agent.pk, version.pk])


def _two_versions(agent, user):
    v1 = agent.current_version
    agent = services.agent_update(agent=agent, user=user, instructions="Second")
    return agent, v1


def test_it_rolls_back_as_a_new_version(client_alice, llm_agent, alice):
    agent, v1 = _two_versions(llm_agent, alice)

    response = client_alice.post(_url(agent, v1), follow=True)

    agent.refresh_from_db()
    assert response.redirect_chain[-1][0] == reverse("agents:versions", args=[agent.pk])
    assert agent.current_version.number == 3
    assert agent.current_version.rolled_back_from == v1
    assert agent.current_version.instructions == v1.instructions
    assert "saved as version 3" in response.text


def test_rolling_back_to_the_current_version_says_why_not(client_alice, llm_agent):
    response = client_alice.post(_url(llm_agent, llm_agent.current_version), follow=True)

    assert "already the current version" in response.text
    assert llm_agent.versions.count() == 1


def test_htmx_success_redirects_the_client(client_alice, llm_agent, alice):
    agent, v1 = _two_versions(llm_agent, alice)

    response = client_alice.post(_url(agent, v1), headers={"HX-Request": "true"})

    assert response["HX-Redirect"] == reverse("agents:versions", args=[agent.pk])


def test_htmx_refusal_is_a_toast(client_alice, llm_agent):
    response = client_alice.post(_url(llm_agent, llm_agent.current_version), headers={"HX-Request": "true"})

    assert response.status_code == 204
    assert "already the current version" in response["HX-Trigger"]


def test_another_agents_version_is_404(client_alice, llm_agent, agent):
    assert client_alice.post(_url(llm_agent, agent.current_version)).status_code == 404


def test_outsiders_get_404_and_change_nothing(client_charlie, llm_agent, alice):
    agent, v1 = _two_versions(llm_agent, alice)

    assert client_charlie.post(_url(agent, v1)).status_code == 404
    assert agent.versions.count() == 2


def test_get_is_not_allowed(client_alice, llm_agent, alice):
    agent, v1 = _two_versions(llm_agent, alice)
    assert client_alice.get(_url(agent, v1)).status_code == 405


def test_anonymous_users_are_sent_to_login(client, llm_agent, alice):
    agent, v1 = _two_versions(llm_agent, alice)
    assert client.post(_url(agent, v1))["Location"].startswith(reverse("accounts:login"))
    assert agent.versions.count() == 2


def test_a_rollback_restores_the_llm_timeout_and_later_versions_keep_it(client_alice, llm_agent, alice):
    agent = services.agent_update(agent=llm_agent, user=alice, llm_timeout=45)
    with_timeout = agent.current_version
    agent = services.agent_update(agent=agent, user=alice, llm_timeout=None, instructions="Second")
    assert agent.current_version.llm_timeout is None

    client_alice.post(_url(agent, with_timeout))

    agent.refresh_from_db()
    assert agent.current_version.rolled_back_from == with_timeout
    assert agent.current_version.llm_timeout == 45
    # An edit of another field copies the timeout into the next version.
    agent = services.agent_update(agent=agent, user=alice, guardrails="Be strict.")
    assert agent.current_version.llm_timeout == 45
