from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.urls import reverse

from accounts.models import Membership
from tests.factories import UserFactory

URL = reverse("accounts:member_add")


def test_an_owner_adds_an_existing_user_by_username(client_alice, team):
    dave = UserFactory(username="Dave")

    response = client_alice.post(URL, {"mode": "existing", "username": "dave", "role": "member"})

    assert response["Location"] == reverse("accounts:settings") + "#team"
    assert Membership.objects.get(team=team, user=dave).role == "member"


def test_an_unknown_username_is_a_field_error(client_alice, team):
    response = client_alice.post(URL, {"mode": "existing", "username": "nobody", "role": "member"})

    assert response.status_code == 200
    assert "No user is called “nobody”" in response.text


def test_adding_someone_twice_is_refused(client_alice, bob):
    response = client_alice.post(URL, {"mode": "existing", "username": "bob", "role": "owner"})

    assert "already in this team" in response.text
    assert bob.memberships.get().role == "member"


def test_an_owner_creates_a_user_with_a_password(client_alice, team):
    client_alice.post(
        URL,
        {
            "mode": "new",
            "username": "erin",
            "email": "erin@example.com",
            "password": "a-long-passphrase-42",
            "role": "owner",
        },
    )

    erin = User.objects.get(username="erin")
    assert Membership.objects.get(team=team, user=erin).role == "owner"
    assert authenticate(username="erin", password="a-long-passphrase-42") == erin
    assert "a-long-passphrase-42" not in erin.password  # hashed


def test_a_weak_password_is_refused(client_alice):
    response = client_alice.post(URL, {"mode": "new", "username": "erin", "password": "password", "role": "member"})

    assert response.status_code == 200
    assert "too common" in response.text or "too short" in response.text
    assert not User.objects.filter(username="erin").exists()


def test_a_taken_username_is_refused_for_new_users(client_alice, bob):
    response = client_alice.post(
        URL, {"mode": "new", "username": "BOB", "password": "a-long-passphrase-42", "role": "member"}
    )

    assert "is taken" in response.text
    assert User.objects.filter(username__iexact="bob").count() == 1


def test_htmx_returns_the_team_section(client_alice, team):
    UserFactory(username="dave")

    response = client_alice.post(
        URL, {"mode": "existing", "username": "dave", "role": "member"}, headers={"HX-Request": "true"}
    )

    assert response.text.lstrip().startswith('<section id="team"')
    assert "dave" in response.text
    assert "dave joined Acme QA." in response["HX-Trigger"]


def test_htmx_errors_keep_the_chosen_mode(client_alice):
    response = client_alice.post(
        URL, {"mode": "new", "username": "x", "password": "1", "role": "member"}, headers={"HX-Request": "true"}
    )

    assert 'id="add-mode-new" value="new" checked' in response.text


def test_a_member_cannot_add_people(client_bob, team):
    UserFactory(username="dave")
    assert client_bob.post(URL, {"mode": "existing", "username": "dave", "role": "owner"}).status_code == 403
    assert not Membership.objects.filter(user__username="dave").exists()


def test_get_is_not_allowed(client_alice):
    assert client_alice.get(URL).status_code == 405


def test_anonymous_users_are_sent_to_login(client, team):
    assert client.post(URL, {"username": "x"})["Location"].startswith(reverse("accounts:login"))
