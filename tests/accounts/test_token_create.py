import re

from django.urls import reverse

from accounts.models import ApiToken

URL = reverse("accounts:token_create")
RAW = re.compile(r"evs_[A-Za-z0-9_\-]{30,}")


def test_the_raw_token_is_shown_once_and_stored_hashed(client_alice, alice):
    response = client_alice.post(URL, {"name": "CI pipeline"})

    assert response.status_code == 200
    raw = RAW.search(response.text).group(0)
    token = ApiToken.objects.get(user=alice)
    assert token.name == "CI pipeline"
    assert token.token_hash == ApiToken.hash(raw)
    assert raw.startswith(token.hint) and len(token.hint) < 12
    # The stored row holds no copy of the secret, in any field.
    row = ApiToken.objects.filter(pk=token.pk).values().get()
    assert all(raw not in str(value) for value in row.values())
    assert "Copy your new token" in response.text

    # Never shown again.
    assert raw not in client_alice.get(reverse("accounts:settings")).text


def test_htmx_returns_the_tokens_section_with_the_token(client_alice):
    response = client_alice.post(URL, {"name": "Laptop"}, headers={"HX-Request": "true"})

    assert response.text.lstrip().startswith('<section id="tokens"')
    assert RAW.search(response.text)
    # The alert with the Copy button is the confirmation: no toast to cover that button.
    assert "HX-Trigger" not in response
    assert re.search(r'<input[^>]*id="new-token-value"[^>]*autofocus', response.text)


def test_a_name_is_required(client_alice, alice):
    response = client_alice.post(URL, {"name": "  "}, headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert not ApiToken.objects.filter(user=alice).exists()
    assert "errorlist" in response.text


def test_tokens_are_personal(client_alice, client_bob, bob):
    client_alice.post(URL, {"name": "Alice's"})

    assert "Alice&#x27;s" not in client_bob.get(reverse("accounts:settings")).text
    assert not ApiToken.objects.filter(user=bob).exists()


def test_get_is_not_allowed(client_alice):
    assert client_alice.get(URL).status_code == 405


def test_anonymous_users_are_sent_to_login(client, db):
    assert client.post(URL, {"name": "x"})["Location"].startswith(reverse("accounts:login"))
    assert not ApiToken.objects.exists()
