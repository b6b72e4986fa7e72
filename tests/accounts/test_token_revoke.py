from django.urls import reverse

from accounts import services
from accounts.models import ApiToken


def _url(token: ApiToken) -> str:
    return reverse("accounts:token_revoke", args=[token.pk])


def test_it_revokes_the_token(client_alice, alice):
    token, _ = services.api_token_create(user=alice, name="CI")

    response = client_alice.post(_url(token))

    token.refresh_from_db()
    assert token.revoked_at is not None
    assert response["Location"] == reverse("accounts:settings") + "#tokens"


def test_revoking_twice_keeps_the_first_time(client_alice, alice):
    token, _ = services.api_token_create(user=alice, name="CI")
    client_alice.post(_url(token))
    token.refresh_from_db()
    first = token.revoked_at

    client_alice.post(_url(token))

    token.refresh_from_db()
    assert token.revoked_at == first


def test_htmx_returns_the_tokens_section(client_alice, alice):
    token, _ = services.api_token_create(user=alice, name="CI")

    response = client_alice.post(_url(token), headers={"HX-Request": "true"})

    assert response.text.lstrip().startswith('<section id="tokens"')
    assert "Revoked" in response.text


def test_a_teammate_cannot_revoke_your_token(client_bob, alice):
    token, _ = services.api_token_create(user=alice, name="CI")

    assert client_bob.post(_url(token)).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_outsiders_get_404(client_charlie, alice):
    token, _ = services.api_token_create(user=alice, name="CI")
    assert client_charlie.post(_url(token)).status_code == 404


def test_get_is_not_allowed(client_alice, alice):
    token, _ = services.api_token_create(user=alice, name="CI")
    assert client_alice.get(_url(token)).status_code == 405


def test_anonymous_users_are_sent_to_login(client, alice):
    token, _ = services.api_token_create(user=alice, name="CI")
    assert client.post(_url(token))["Location"].startswith(reverse("accounts:login"))
