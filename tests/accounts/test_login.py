import time_machine
from django.test import Client
from django.urls import reverse

URL = reverse("accounts:login")
PASSWORD = "correct horse battery staple"  # tests.factories.UserFactory's password


def _login(client: Client, username: str, password: str, next: str = ""):
    data = {"username": username, "password": password, **({"next": next} if next else {})}
    return client.post(URL, data)


def test_the_login_page_renders(client, db):
    response = client.get(URL)

    assert response.status_code == 200
    assert 'name="username"' in response.text and 'autocomplete="current-password"' in response.text
    assert response.text.count('class="brand"') == 1  # not in the top bar and above the card both


def test_good_credentials_sign_in_and_go_to_the_agents(client, alice):
    response = _login(client, "alice", PASSWORD)

    assert response.status_code == 302
    assert response["Location"] == reverse("agents:list")
    assert client.session["_auth_user_id"] == str(alice.pk)


def test_it_follows_a_safe_next_url_only(client, alice):
    assert _login(client, "alice", PASSWORD, next="/accounts/settings/")["Location"] == "/accounts/settings/"
    client.logout()
    assert _login(client, "alice", PASSWORD, next="https://evil.example.com/")["Location"] == reverse("agents:list")


def test_bad_credentials_show_an_error(client, alice):
    response = _login(client, "alice", "wrong")

    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.text
    assert "_auth_user_id" not in client.session


def test_a_signed_in_user_is_sent_on(client_alice):
    assert client_alice.get(URL)["Location"] == reverse("agents:list")


def test_too_many_failures_for_a_username_are_refused_even_with_the_right_password(client, alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 3
    for _ in range(3):
        _login(client, "alice", "wrong")

    response = _login(client, "ALICE", PASSWORD)  # the username counter ignores case

    assert response.status_code == 429
    assert "Too many failed sign-in attempts" in response.text
    assert "_auth_user_id" not in client.session


def test_too_many_failures_from_one_address_are_refused_for_any_username(client, alice, bob, settings):
    settings.LOGIN_THROTTLE_ADDRESS_ATTEMPTS = 3
    for name in ("x1", "x2", "x3"):
        _login(client, name, "wrong")

    response = _login(client, "bob", PASSWORD)

    assert response.status_code == 429


def test_another_address_can_still_sign_in_other_users(alice, bob, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 2
    attacker, victim = Client(REMOTE_ADDR="10.0.0.1"), Client(REMOTE_ADDR="10.0.0.2")
    for _ in range(2):
        _login(attacker, "alice", "wrong")

    assert _login(victim, "bob", PASSWORD).status_code == 302
    # The guesser locked alice out of its own address only: from hers she still signs in.
    assert _login(attacker, "alice", PASSWORD).status_code == 429
    assert _login(Client(REMOTE_ADDR="10.0.0.3"), "alice", PASSWORD).status_code == 302


def test_a_username_is_locked_everywhere_only_after_the_longer_threshold(alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 2
    settings.LOGIN_THROTTLE_USERNAME_ATTEMPTS = 4
    for n in range(4):  # a guesser spread over four addresses, under the per-address limit each
        _login(Client(REMOTE_ADDR=f"10.1.0.{n}"), "alice", "wrong")

    assert _login(Client(REMOTE_ADDR="10.2.0.1"), "alice", PASSWORD).status_code == 429


def test_behind_a_trusted_proxy_each_client_has_its_own_counter(alice, bob, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 2
    settings.LOGIN_THROTTLE_ADDRESS_ATTEMPTS = 2
    settings.LOGIN_TRUSTED_PROXIES = 1
    proxy = "10.9.9.9"  # every request reaches gunicorn from nginx
    attacker = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="203.0.113.5")
    for _ in range(2):
        _login(attacker, "alice", "wrong")
    assert _login(attacker, "bob", PASSWORD).status_code == 429  # the attacker's address is locked

    victim = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="198.51.100.7")
    assert _login(victim, "alice", PASSWORD).status_code == 302


def test_a_forged_forwarded_for_does_not_pick_the_address(alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 2
    settings.LOGIN_TRUSTED_PROXIES = 1
    # The client wrote its own X-Forwarded-For; nginx appended the address it really saw.
    for n in range(2):
        _login(Client(REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR=f"1.2.3.{n}, 203.0.113.5"), "alice", "wrong")
    forged = Client(REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="9.9.9.9, 203.0.113.5")
    assert _login(forged, "alice", PASSWORD).status_code == 429


def test_without_trusted_proxies_the_header_is_ignored(alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 2
    for n in range(2):
        _login(Client(REMOTE_ADDR="10.5.5.5", HTTP_X_FORWARDED_FOR=f"1.2.3.{n}"), "alice", "wrong")
    assert _login(Client(REMOTE_ADDR="10.5.5.5", HTTP_X_FORWARDED_FOR="4.4.4.4"), "alice", PASSWORD).status_code == 429


def test_the_throttle_ends_after_the_window(client, alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 2
    settings.LOGIN_THROTTLE_WINDOW = 300
    with time_machine.travel("2026-01-01 12:00", tick=False) as traveller:
        for _ in range(2):
            _login(client, "alice", "wrong")
        assert _login(client, "alice", PASSWORD).status_code == 429
        assert "wait 5 minutes" in _login(client, "alice", PASSWORD).text

        traveller.shift(301)
        assert _login(client, "alice", PASSWORD).status_code == 302


def test_a_success_resets_the_username_counter(client, alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 3
    _login(Client(REMOTE_ADDR="10.0.0.9"), "alice", "wrong")
    _login(Client(REMOTE_ADDR="10.0.0.9"), "alice", "wrong")
    assert _login(Client(REMOTE_ADDR="10.0.0.8"), "alice", PASSWORD).status_code == 302

    # Two more failures from a third address stay under the limit again.
    other = Client(REMOTE_ADDR="10.0.0.7")
    _login(other, "alice", "wrong")
    _login(other, "alice", "wrong")
    assert _login(Client(REMOTE_ADDR="10.0.0.6"), "alice", PASSWORD).status_code == 302


def test_htmx_requests_get_the_page(client, db):
    response = client.get(URL, headers={"HX-Request": "true"})
    assert response.status_code == 200


def test_put_is_not_allowed(client, db):
    assert client.put(URL).status_code == 405


def test_sign_in_still_works_when_the_cache_is_down(alice, settings):
    from django.test import Client

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
    }
    client = Client()

    response = client.post("/accounts/login/", {"username": "alice", "password": "correct horse battery staple"})

    assert response.status_code == 302
