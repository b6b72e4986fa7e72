"""Login throttling: refuse sign-in after too many failures, counted three ways.

- per (username, address): LOGIN_THROTTLE_ATTEMPTS (5) failures lock that username from
  that address only, so a guesser elsewhere cannot lock a user out of their own desk;
- per username, from every address: LOGIN_THROTTLE_USERNAME_ATTEMPTS (50), a much longer
  threshold against a guesser who spreads over many addresses;
- per address, for every username: LOGIN_THROTTLE_ADDRESS_ATTEMPTS (50), against one
  address trying many usernames.

The address is the peer's, or behind LOGIN_TRUSTED_PROXIES reverse proxies the one the
outermost trusted proxy saw (X-Forwarded-For), so users behind one proxy do not share a
counter and a client cannot choose its own address by forging the header.

A browser that has signed in as a username holds a signed "known device" cookie for it
(LOGIN_KNOWN_DEVICE_DAYS, 90 days): with it, that username's sign-in is counted against
that device alone (LOGIN_THROTTLE_ATTEMPTS failures lock the device), never against the
counters above. Behind a proxy the site was not told of (LOGIN_TRUSTED_PROXIES=0), every
client shares the proxy's address, and an attacker's five bad passwords would lock that
username for everyone; with the cookie, the users' own browsers still sign in while the
attacker, who has none, stays throttled (the device cookies of OWASP's Authentication
Cheat Sheet). A request that arrives with X-Forwarded-For or Forwarded while
LOGIN_TRUSTED_PROXIES is 0 is logged, and noted in the cache for `check --deploy`
(accounts/checks.py), which also warns when SECURE_PROXY_SSL_HEADER declares a proxy.

Counters live in Django's cache, which settings point at Redis so that every web
process shares them. When Redis cannot be reached, sign-in still works (unthrottled,
with a logged warning): an outage of the cache must not lock every user out.
"""

import hashlib
import logging
import math
import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

_PREFIX = "login-failures"
logger = logging.getLogger(__name__)
T = TypeVar("T")


def _tolerant(call: Callable[[], T], default: T) -> T:
    try:
        return call()
    except Exception:  # the cache backend's connection errors have no common base class
        logger.warning("Login throttling is off: the cache (Redis) cannot be reached.", exc_info=True)
        return default


def _user_hash(username: str) -> str:
    # Hash the username: cache keys must be short and free of spaces/control characters.
    return hashlib.sha256(username.strip().lower().encode()).hexdigest()


def _limits(*, username: str, ip: str) -> dict[str, int]:
    """Each counter's cache key and the failures it allows."""
    user = _user_hash(username)
    return {
        f"{_PREFIX}:pair:{user}:{ip}": settings.LOGIN_THROTTLE_ATTEMPTS,
        f"{_PREFIX}:user:{user}": settings.LOGIN_THROTTLE_USERNAME_ATTEMPTS,
        f"{_PREFIX}:ip:{ip}": settings.LOGIN_THROTTLE_ADDRESS_ATTEMPTS,
    }


# Set, for a day, when a request came through a proxy the settings do not declare.
PROXY_SEEN_KEY = f"{_PREFIX}:proxy-headers-seen"
_PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")
_proxy_warned = False
_DEVICE_SALT = "accounts.throttling.known-device"
_DEVICE_COOKIE = "evalsite_device_"


def client_ip(request: HttpRequest) -> str:
    """The client's address: the peer's, or behind LOGIN_TRUSTED_PROXIES proxies the address the
    outermost of them saw. Each proxy appends the address it received the request from to
    X-Forwarded-For, so with N trusted proxies the client is the N-th entry from the right;
    anything further left was written by the client and may be forged."""
    proxies = settings.LOGIN_TRUSTED_PROXIES
    peer = request.META.get("REMOTE_ADDR") or "unknown"
    if proxies <= 0:
        if any(request.META.get(header) for header in _PROXY_HEADERS):
            _proxy_seen(peer)
        return peer
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if not forwarded:
        return peer
    return forwarded[-proxies] if len(forwarded) >= proxies else forwarded[0]


def _proxy_seen(peer: str) -> None:
    """A request came through a proxy while LOGIN_TRUSTED_PROXIES is 0: every client then has the
    proxy's address. Logged once per process; noted for `check --deploy` (accounts/checks.py)."""
    global _proxy_warned
    if not _proxy_warned:
        _proxy_warned = True
        logger.warning(
            "A request from %s carries X-Forwarded-For or Forwarded, but LOGIN_TRUSTED_PROXIES is 0: every "
            "client behind that proxy shares one address for sign-in throttling. Set LOGIN_TRUSTED_PROXIES "
            "to the number of proxies in front of the site.",
            peer,
        )
    _tolerant(lambda: cache.add(PROXY_SEEN_KEY, peer, timeout=24 * 3600), None)


def proxy_headers_seen() -> str | None:
    """The address of a proxy whose headers reached the site while LOGIN_TRUSTED_PROXIES is 0, in the last day."""
    return _tolerant(lambda: cache.get(PROXY_SEEN_KEY), None)


def _device_limits(device: str) -> dict[str, int]:
    return {f"{_PREFIX}:device:{device}": settings.LOGIN_THROTTLE_ATTEMPTS}


def _counted(*, username: str, ip: str, device: str | None) -> dict[str, int]:
    """The counters a sign-in is held to: its known device's alone, or the three above."""
    return _device_limits(device) if device else _limits(username=username, ip=ip)


def login_is_throttled(*, username: str, ip: str, device: str | None = None) -> bool:
    """`device`: the browser's known device for this username (`known_device`), if it has one."""
    limits = _counted(username=username, ip=ip, device=device)
    counts: dict[str, Any] = _tolerant(lambda: cache.get_many(list(limits)), {})
    return any(count >= limits[key] for key, count in counts.items())


def login_failure_record(*, username: str, ip: str, device: str | None = None) -> None:
    """Count one failure. The window starts at the first failure (a fixed window)."""
    _tolerant(lambda: _record(list(_counted(username=username, ip=ip, device=device))), None)


def _record(keys: list[str]) -> None:
    for key in keys:
        # add() only sets a missing key, so the expiry is not pushed back by later failures.
        cache.add(key, 0, timeout=settings.LOGIN_THROTTLE_WINDOW)
        try:
            cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.set(key, 1, timeout=settings.LOGIN_THROTTLE_WINDOW)


def login_success_reset(*, username: str, ip: str, device: str | None = None) -> None:
    """A successful sign-in clears the username's counters (from this address and overall) and its
    device's; the address counter stays, so one valid account cannot reset guessing against others.
    From a known device it clears only the device's: the attacker's count against the username
    goes on."""
    if device:
        user_keys = list(_device_limits(device))
    else:
        user_keys = [key for key in _limits(username=username, ip=ip) if not key.startswith(f"{_PREFIX}:ip:")]
    _tolerant(lambda: cache.delete_many(user_keys), None)


def known_device(request: HttpRequest, username: str) -> str | None:
    """The device this browser proved it is for `username`: the id in its signed cookie, set when
    it signed in as that username within LOGIN_KNOWN_DEVICE_DAYS; None without a valid one."""
    days = settings.LOGIN_KNOWN_DEVICE_DAYS
    value = request.COOKIES.get(_device_cookie_name(username))
    if days <= 0 or not value:
        return None
    try:
        data = signing.loads(value, salt=_DEVICE_SALT, max_age=days * 24 * 3600)
    except signing.BadSignature:  # tampered, another key's, or expired
        return None
    if not isinstance(data, dict) or data.get("user") != _user_hash(username) or not data.get("device"):
        return None
    return str(data["device"])


def known_device_remember(response: HttpResponse, *, username: str, device: str | None) -> None:
    """After a successful sign-in: (re)issue this browser's known-device cookie for `username`,
    keeping its device id, for LOGIN_KNOWN_DEVICE_DAYS more days."""
    days = settings.LOGIN_KNOWN_DEVICE_DAYS
    if days <= 0:
        return
    value = signing.dumps({"user": _user_hash(username), "device": device or secrets.token_hex(16)}, salt=_DEVICE_SALT)
    response.set_cookie(
        _device_cookie_name(username),
        value,
        max_age=days * 24 * 3600,
        path=reverse("accounts:login"),  # sent only to the sign-in page
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


def _device_cookie_name(username: str) -> str:
    # One per username the browser signed in as; the name holds a hash, never the username.
    return _DEVICE_COOKIE + _user_hash(username)[:16]


def throttle_message() -> str:
    minutes = max(1, math.ceil(settings.LOGIN_THROTTLE_WINDOW / 60))
    unit = "minute" if minutes == 1 else "minutes"
    return f"Too many failed sign-in attempts. For your security, wait {minutes} {unit} and try again."
