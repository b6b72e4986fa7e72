"""A lock-out an attacker causes cannot block a real user (issue 48).

Behind a proxy the site was not told of (the shipped LOGIN_TRUSTED_PROXIES=0), every client
reaches gunicorn from the proxy's address: an attacker's bad passwords for alice lock alice
out from that one address, which is everyone's. A browser alice signed in with before holds
a signed known-device cookie and still signs in; the attacker, who has none, stays throttled.
The proxy case itself is logged and warned of by `check --deploy`.
"""

import logging

import time_machine
from django.core.checks import run_checks
from django.test import Client
from django.urls import reverse

from accounts import throttling

URL = reverse("accounts:login")
PASSWORD = "correct horse battery staple"  # tests.factories.UserFactory's password
PROXY = "10.9.9.9"  # every request reaches gunicorn from nginx


def _login(client: Client, username: str, password: str):
    return client.post(URL, {"username": username, "password": password})


def _through_proxy(client_address: str) -> Client:
    return Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=client_address)


def _known_browser(username: str) -> Client:
    """Alice's own browser: it signed in once, then signed out."""
    browser = _through_proxy("198.51.100.7")
    assert _login(browser, username, PASSWORD).status_code == 302
    browser.post(reverse("accounts:logout"))
    return browser


def _attack(username: str, times: int, address: str = "203.0.113.5") -> Client:
    attacker = _through_proxy(address)
    for _ in range(times):
        _login(attacker, username, "wrong")
    return attacker


def test_an_attacker_behind_the_same_proxy_cannot_lock_a_known_browser_out(alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 5
    browser = _known_browser("alice")

    attacker = _attack("alice", 5)

    assert _login(attacker, "alice", PASSWORD).status_code == 429  # the attacker stays throttled
    assert _login(_through_proxy("192.0.2.44"), "alice", PASSWORD).status_code == 429  # a new browser too
    response = _login(browser, "alice", PASSWORD)
    assert response.status_code == 302 and browser.session["_auth_user_id"] == str(alice.pk)


def test_the_longer_username_and_address_thresholds_do_not_lock_a_known_browser_out(alice, settings):
    settings.LOGIN_TRUSTED_PROXIES = 1  # each client has its own address here
    settings.LOGIN_THROTTLE_USERNAME_ATTEMPTS = 4
    settings.LOGIN_THROTTLE_ADDRESS_ATTEMPTS = 4
    browser = _known_browser("alice")
    for n in range(4):  # one guesser spread over four addresses
        _attack("alice", 1, address=f"203.0.113.{n}")
    _attack("bob", 4, address="198.51.100.7")  # and one from the known browser's own address

    assert _login(_through_proxy("192.0.2.44"), "alice", PASSWORD).status_code == 429
    assert _login(browser, "alice", PASSWORD).status_code == 302


def test_a_known_browser_is_throttled_by_its_own_failures(alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 3
    browser = _known_browser("alice")
    for _ in range(3):  # a stolen cookie buys a guesser no more tries than anyone
        _login(browser, "alice", "wrong")

    assert _login(browser, "alice", PASSWORD).status_code == 429


def test_a_known_browser_s_own_slips_are_forgiven_by_its_next_sign_in(alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 3
    browser = _known_browser("alice")
    for _ in range(2):
        _login(browser, "alice", "wrong")
    assert _login(browser, "alice", PASSWORD).status_code == 302
    browser.post(reverse("accounts:logout"))
    for _ in range(2):
        _login(browser, "alice", "wrong")

    assert _login(browser, "alice", PASSWORD).status_code == 302


def test_a_cookie_for_another_user_or_a_tampered_one_proves_nothing(alice, bob, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 2
    bobs_browser = _known_browser("bob")
    _attack("alice", 2)
    assert _login(bobs_browser, "alice", PASSWORD).status_code == 429  # bob's cookie is for bob

    forged = _through_proxy("198.51.100.8")
    name = next(iter(bobs_browser.cookies))
    forged.cookies[name.replace(name[-16:], throttling._user_hash("alice")[:16])] = bobs_browser.cookies[name].value
    assert _login(forged, "alice", PASSWORD).status_code == 429


def test_a_browser_is_known_for_login_known_device_days(alice, settings):
    settings.LOGIN_THROTTLE_ATTEMPTS = 2
    with time_machine.travel("2026-01-01 12:00", tick=False) as traveller:
        browser = _known_browser("alice")
        traveller.shift(settings.LOGIN_KNOWN_DEVICE_DAYS * 24 * 3600 - 60)
        _attack("alice", 2)
        assert _login(browser, "alice", PASSWORD).status_code == 302  # its cookie is renewed
        browser.post(reverse("accounts:logout"))
        traveller.shift(settings.LOGIN_KNOWN_DEVICE_DAYS * 24 * 3600 + 60)
        _attack("alice", 2)
        assert _login(browser, "alice", PASSWORD).status_code == 429  # expired: the lock-out applies


def test_the_cookie_is_signed_http_only_and_sent_to_the_sign_in_page_only(alice, settings):
    settings.SESSION_COOKIE_SECURE = True
    response = _login(_through_proxy("198.51.100.7"), "alice", PASSWORD)

    (cookie,) = [morsel for name, morsel in response.cookies.items() if name.startswith("evalsite_device_")]
    assert cookie["httponly"] and cookie["secure"] and cookie["samesite"] == "Lax"
    assert cookie["path"] == URL and int(cookie["max-age"]) == settings.LOGIN_KNOWN_DEVICE_DAYS * 24 * 3600
    assert "alice" not in cookie.key and "alice" not in cookie.value


def test_with_known_devices_off_the_lock_out_applies_to_everyone(alice, settings):
    settings.LOGIN_KNOWN_DEVICE_DAYS = 0
    settings.LOGIN_THROTTLE_ATTEMPTS = 2
    browser = _known_browser("alice")
    _attack("alice", 2)

    assert _login(browser, "alice", PASSWORD).status_code == 429


def test_a_request_through_an_undeclared_proxy_is_logged_once_and_noted(alice, settings, caplog, monkeypatch):
    monkeypatch.setattr(throttling, "_proxy_warned", False)
    with caplog.at_level(logging.WARNING, logger="accounts.throttling"):
        for _ in range(3):
            _attack("alice", 1)
    warnings = [record for record in caplog.records if "LOGIN_TRUSTED_PROXIES is 0" in record.getMessage()]
    assert len(warnings) == 1 and PROXY in warnings[0].getMessage()
    assert throttling.proxy_headers_seen() == PROXY


def test_no_proxy_headers_nothing_noted(alice, monkeypatch):
    monkeypatch.setattr(throttling, "_proxy_warned", False)
    _login(Client(REMOTE_ADDR="10.1.1.1"), "alice", "wrong")
    assert throttling.proxy_headers_seen() is None


def _deploy_warnings() -> set[str]:
    return {message.id for message in run_checks(include_deployment_checks=True) if message.id.startswith("accounts.")}


def test_check_deploy_warns_of_a_declared_proxy_that_throttling_does_not_count(settings, db):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.LOGIN_TRUSTED_PROXIES = 0
    assert _deploy_warnings() == {"accounts.W001"}

    settings.LOGIN_TRUSTED_PROXIES = 1
    assert _deploy_warnings() == set()


def test_check_deploy_warns_of_proxy_headers_seen_in_the_last_day(alice, settings, monkeypatch):
    monkeypatch.setattr(throttling, "_proxy_warned", False)
    assert _deploy_warnings() == set()
    _attack("alice", 1)

    assert _deploy_warnings() == {"accounts.W002"}
    settings.LOGIN_TRUSTED_PROXIES = 1
    assert _deploy_warnings() == set()
