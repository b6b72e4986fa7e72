from django.urls import reverse

from agents import services


def _url(agent) -> str:
    return reverse("agents:versions", args=[agent.pk])


def test_it_lists_versions_with_who_when_why_and_current(client_alice, llm_agent, bob):
    services.agent_update(agent=llm_agent, user=bob, note="Warmer tone", instructions="Be warm.")

    response = client_alice.get(_url(llm_agent))

    assert response.status_code == 200
    versions = response.context["versions"]
    assert [v.number for v in versions] == [2, 1]
    assert "Warmer tone" in response.text and "bob" in response.text
    assert "Current" in response.text
    # Roll back is offered on v1 only.
    assert reverse("agents:version_rollback", args=[llm_agent.pk, versions[1].pk]) in response.text
    assert reverse("agents:version_rollback", args=[llm_agent.pk, versions[0].pk]) not in response.text


def test_it_compares_previous_and_current_by_default(client_alice, llm_agent, alice):
    services.agent_update(agent=llm_agent, user=alice, instructions="You are the refund helper.\nBe warm.")

    response = client_alice.get(_url(llm_agent))

    assert response.context["a"].number == 1 and response.context["b"].number == 2
    assert '<div class="del" role="row">' in response.text
    assert "Be brief." in response.text and "Be warm." in response.text


def test_any_two_versions_can_be_compared(client_alice, llm_agent, alice):
    services.agent_update(agent=llm_agent, user=alice, skills="S2")
    agent = services.agent_update(agent=llm_agent, user=alice, skills="S3")
    v1, v3 = agent.versions.get(number=1), agent.versions.get(number=3)

    response = client_alice.get(_url(agent), {"a": v3.pk, "b": v1.pk})

    fields = [field.field for field in response.context["diff"]]
    assert fields == ["skills"]
    assert [line.kind for line in response.context["diff"][0].lines] == ["del"]


def test_a_single_version_has_nothing_to_compare(client_alice, llm_agent):
    response = client_alice.get(_url(llm_agent))

    assert "Only one version so far" in response.text


def test_htmx_compare_swaps_the_compare_fragment(client_alice, llm_agent, alice):
    services.agent_update(agent=llm_agent, user=alice, skills="S2")

    response = client_alice.get(_url(llm_agent), headers={"HX-Request": "true"})

    assert response.text.lstrip().startswith('<section id="compare"')
    assert "History" not in response.text


def test_unknown_version_ids_fall_back_to_the_default_pair(client_alice, llm_agent, agent, alice):
    services.agent_update(agent=llm_agent, user=alice, skills="S2")

    # Another agent's version id is ignored, never compared.
    response = client_alice.get(_url(llm_agent), {"a": agent.current_version.pk, "b": "x"})

    assert response.context["a"].agent_id == llm_agent.pk
    assert response.context["b"].agent_id == llm_agent.pk


def test_outsiders_get_404(client_charlie, llm_agent):
    assert client_charlie.get(_url(llm_agent)).status_code == 404


def test_post_is_not_allowed(client_alice, llm_agent):
    assert client_alice.post(_url(llm_agent)).status_code == 405


def test_anonymous_users_are_sent_to_login(client, llm_agent):
    assert client.get(_url(llm_agent))["Location"].startswith(reverse("accounts:login"))
