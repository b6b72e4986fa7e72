from django.urls import reverse

from accounts.middleware import SESSION_KEY
from accounts.models import Membership


def _url(membership: Membership) -> str:
    return reverse("accounts:member_remove", args=[membership.pk])


def test_an_owner_removes_a_member(client_alice, bob, team):
    response = client_alice.post(_url(bob.memberships.get()))

    assert response["Location"] == reverse("accounts:settings") + "#team"
    assert not Membership.objects.filter(team=team, user=bob).exists()
    assert bob.is_active  # the account stays


def test_the_last_owner_cannot_be_removed_or_leave(client_alice, alice, team):
    response = client_alice.post(_url(alice.memberships.get()), follow=True)

    assert Membership.objects.filter(team=team, user=alice).exists()
    assert "The last owner cannot leave" in response.text


def test_a_member_can_leave(client_bob, bob, team):
    response = client_bob.post(_url(bob.memberships.get()))

    assert not Membership.objects.filter(team=team, user=bob).exists()
    assert response["Location"] == reverse("accounts:settings")
    assert SESSION_KEY not in client_bob.session


def test_a_member_cannot_remove_others(client_bob, alice, team):
    assert client_bob.post(_url(alice.memberships.get())).status_code == 403
    assert Membership.objects.filter(team=team, user=alice).exists()


def test_htmx_returns_the_team_section(client_alice, bob):
    response = client_alice.post(_url(bob.memberships.get()), headers={"HX-Request": "true"})

    assert response.text.lstrip().startswith('<section id="team"')
    assert "bob was removed" in response["HX-Trigger"]


def test_htmx_leaving_redirects_the_client(client_bob, bob):
    response = client_bob.post(_url(bob.memberships.get()), headers={"HX-Request": "true"})
    assert response["HX-Redirect"] == reverse("accounts:settings")


def test_outsiders_get_404(client_charlie, bob, team):
    assert client_charlie.post(_url(bob.memberships.get())).status_code == 404
    assert Membership.objects.filter(team=team, user=bob).exists()


def test_get_is_not_allowed(client_alice, bob):
    assert client_alice.get(_url(bob.memberships.get())).status_code == 405


def test_anonymous_users_are_sent_to_login(client, bob):
    assert client.post(_url(bob.memberships.get()))["Location"].startswith(reverse("accounts:login"))
