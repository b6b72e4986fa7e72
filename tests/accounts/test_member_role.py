from django.urls import reverse

from accounts.models import Membership


def _url(membership: Membership) -> str:
    return reverse("accounts:member_role", args=[membership.pk])


def test_an_owner_promotes_a_member(client_alice, bob):
    membership = bob.memberships.get()

    response = client_alice.post(_url(membership), {"role": "owner"})

    membership.refresh_from_db()
    assert membership.role == "owner"
    assert response["Location"] == reverse("accounts:settings") + "#team"


def test_the_last_owner_cannot_step_down(client_alice, alice):
    membership = alice.memberships.get()

    response = client_alice.post(_url(membership), {"role": "member"}, follow=True)

    membership.refresh_from_db()
    assert membership.role == "owner"
    assert "needs at least one owner" in response.text


def test_an_owner_can_step_down_once_there_is_another(client_alice, alice, bob):
    Membership.objects.filter(user=bob).update(role="owner")
    membership = alice.memberships.get()

    client_alice.post(_url(membership), {"role": "member"})

    membership.refresh_from_db()
    assert membership.role == "member"


def test_htmx_returns_the_team_section(client_alice, bob):
    response = client_alice.post(_url(bob.memberships.get()), {"role": "owner"}, headers={"HX-Request": "true"})

    assert response.text.lstrip().startswith('<section id="team"')
    assert "bob is now owner." in response["HX-Trigger"]


def test_htmx_refusal_is_an_error_toast(client_alice, alice):
    response = client_alice.post(_url(alice.memberships.get()), {"role": "member"}, headers={"HX-Request": "true"})

    assert '"level": "error"' in response["HX-Trigger"]


def test_a_member_cannot_change_roles(client_bob, bob):
    membership = bob.memberships.get()
    assert client_bob.post(_url(membership), {"role": "owner"}).status_code == 403
    membership.refresh_from_db()
    assert membership.role == "member"


def test_outsiders_get_404(client_charlie, bob):
    membership = bob.memberships.get()
    assert client_charlie.post(_url(membership), {"role": "owner"}).status_code == 404
    membership.refresh_from_db()
    assert membership.role == "member"


def test_get_is_not_allowed(client_alice, bob):
    assert client_alice.get(_url(bob.memberships.get())).status_code == 405


def test_anonymous_users_are_sent_to_login(client, bob):
    assert client.post(_url(bob.memberships.get()), {"role": "owner"})["Location"].startswith(reverse("accounts:login"))
