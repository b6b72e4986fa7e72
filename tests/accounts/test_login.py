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
    settings.LOGIN_THROTTLE_ATTEMPTS = 3
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
    # alice's own counter is per username, whatever the address.
    assert _login(Client(REMOTE_ADDR="10.0.0.3"), "alice", PASSWORD).status_code == 429


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
