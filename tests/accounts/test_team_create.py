from django.urls import reverse

from accounts.middleware import SESSION_KEY
from accounts.models import Membership, Team
from tests.factories import UserFactory

URL = reverse("accounts:team_create")


def test_a_first_team_makes_its_creator_the_owner(client, db):
    user = UserFactory(username="newcomer")
    client.force_login(user)

    response = client.post(URL, {"new-name": "  Newco QA  "})

    team = Team.objects.get(name="Newco QA")
    assert response["Location"] == reverse("accounts:settings")
    assert Membership.objects.get(team=team, user=user).role == Membership.Role.OWNER
    assert client.session[SESSION_KEY] == team.pk


def test_another_team_becomes_the_current_one(client_alice, team):
    client_alice.post(URL, {"new-name": "Side project"})

    assert client_alice.session[SESSION_KEY] == Team.objects.get(name="Side project").pk


def test_a_blank_name_is_refused_on_the_first_team_page(client, db):
    client.force_login(UserFactory(username="newcomer"))

    response = client.post(URL, {"new-name": "   "})

    assert response.status_code == 200
    assert "Welcome to Evalsite" in response.text
    assert "This field is required" in response.text or "Enter a team name" in response.text
    assert not Team.objects.exists()


def test_a_blank_name_reopens_the_dialog_on_settings(client_alice):
    response = client_alice.post(URL, {"new-name": ""})

    assert response.status_code == 200
    assert 'id="new-team-dialog" aria-labelledby="new-team-title" data-autoopen' in response.text


def test_htmx_post_creates_the_team_too(client_alice):
    response = client_alice.post(URL, {"new-name": "Via htmx"}, headers={"HX-Request": "true"})
    assert response.status_code == 302
    assert Team.objects.filter(name="Via htmx").exists()


def test_get_is_not_allowed(client_alice):
    assert client_alice.get(URL).status_code == 405


def test_anonymous_users_are_sent_to_login(client, db):
    assert client.post(URL, {"new-name": "X"})["Location"].startswith(reverse("accounts:login"))
    assert not Team.objects.exists()
