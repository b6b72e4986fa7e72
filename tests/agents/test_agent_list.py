from django.urls import reverse

from accounts.middleware import SESSION_KEY
from tests.factories import AgentFactory, MembershipFactory, TeamFactory

URL = reverse("agents:list")


def test_it_lists_the_current_teams_agents(client_alice, agent, other_team):
    AgentFactory(team=other_team, name="Globex secret bot")

    response = client_alice.get(URL)

    assert response.status_code == 200
    assert "Support bot" in response.text
    assert "Globex secret bot" not in response.text
    assert "v1" in response.text


def test_it_shows_only_the_switched_to_team(client_alice, alice, agent):
    second = TeamFactory(name="Second team")
    MembershipFactory(team=second, user=alice, role="member")
    AgentFactory(team=second, name="Second team bot")
    session = client_alice.session
    session[SESSION_KEY] = second.pk
    session.save()

    response = client_alice.get(URL)

    assert "Second team bot" in response.text
    assert "Support bot" not in response.text


def test_an_empty_team_gets_a_call_to_action(client_alice):
    response = client_alice.get(URL)

    assert "No agents yet" in response.text
    assert reverse("agents:create") in response.text


def test_search_filters_by_name_and_description(client_alice, team):
    AgentFactory(team=team, name="Billing bot")
    AgentFactory(team=team, name="Other", description="handles billing disputes")
    AgentFactory(team=team, name="Travel bot")

    response = client_alice.get(URL, {"q": "billing"})

    assert "Billing bot" in response.text and "handles billing disputes" in response.text
    assert "Travel bot" not in response.text


def test_htmx_search_returns_only_the_results_fragment(client_alice, agent):
    response = client_alice.get(URL, {"q": "nothing-matches"}, headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert 'id="agent-results"' in response.text
    assert "<html" not in response.text
    assert "No agents match" in response.text


def test_a_user_without_a_team_is_sent_to_create_one(client, db):
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="loner"))
    response = client.get(URL)

    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:settings")


def test_post_is_not_allowed(client_alice):
    assert client_alice.post(URL).status_code == 405


def test_anonymous_users_are_sent_to_login(client, db):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))
