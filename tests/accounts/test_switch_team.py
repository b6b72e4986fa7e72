from django.urls import reverse

from accounts.middleware import SESSION_KEY
from tests.factories import MembershipFactory, TeamFactory

URL = reverse("accounts:switch_team")


def test_it_switches_to_a_team_the_user_is_in(client_alice, alice, team):
    second = TeamFactory(name="Second")
    MembershipFactory(team=second, user=alice, role="member")

    response = client_alice.post(URL, {"team": second.pk})

    assert response["Location"] == reverse("agents:list")
    assert client_alice.session[SESSION_KEY] == second.pk
    assert client_alice.get(reverse("agents:list")).context["current_team"] == second


def test_a_team_the_user_is_not_in_is_404(client_alice, team, other_team):
    client_alice.get(reverse("agents:list"))  # settles the current team in the session

    response = client_alice.post(URL, {"team": other_team.pk})

    assert response.status_code == 404
    assert client_alice.session[SESSION_KEY] == team.pk


def test_garbage_is_404(client_alice):
    assert client_alice.post(URL, {"team": "abc"}).status_code == 404


def test_a_stale_session_team_falls_back_to_a_team_the_user_is_in(client_alice, team, other_team):
    session = client_alice.session
    session[SESSION_KEY] = other_team.pk  # e.g. the user was removed from that team
    session.save()

    assert client_alice.get(reverse("agents:list")).context["current_team"] == team


def test_htmx_switch_redirects_the_client(client_alice, alice):
    second = TeamFactory(name="Second")
    MembershipFactory(team=second, user=alice)

    response = client_alice.post(URL, {"team": second.pk}, headers={"HX-Request": "true"})

    assert response["HX-Redirect"] == reverse("agents:list")


def test_get_is_not_allowed(client_alice):
    assert client_alice.get(URL).status_code == 405


def test_anonymous_users_are_sent_to_login(client, team):
    assert client.post(URL, {"team": team.pk})["Location"].startswith(reverse("accounts:login"))
