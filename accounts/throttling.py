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

Counters live in Django's cache, which settings point at Redis so that every web
process shares them. When Redis cannot be reached, sign-in still works (unthrottled,
with a logged warning): an outage of the cache must not lock every user out.
"""

import hashlib
import logging
import math
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

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


def client_ip(request: HttpRequest) -> str:
    """The client's address: the peer's, or behind LOGIN_TRUSTED_PROXIES proxies the address the
    outermost of them saw. Each proxy appends the address it received the request from to
    X-Forwarded-For, so with N trusted proxies the client is the N-th entry from the right;
    anything further left was written by the client and may be forged."""
    proxies = settings.LOGIN_TRUSTED_PROXIES
    peer = request.META.get("REMOTE_ADDR") or "unknown"
    if proxies <= 0:
        return peer
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if not forwarded:
        return peer
    return forwarded[-proxies] if len(forwarded) >= proxies else forwarded[0]


def login_is_throttled(*, username: str, ip: str) -> bool:
    limits = _limits(username=username, ip=ip)
    counts: dict[str, Any] = _tolerant(lambda: cache.get_many(list(limits)), {})
    return any(count >= limits[key] for key, count in counts.items())


def login_failure_record(*, username: str, ip: str) -> None:
    """Count one failure. The window starts at the first failure (a fixed window)."""
    _tolerant(lambda: _record(list(_limits(username=username, ip=ip))), None)


def _record(keys: list[str]) -> None:
    for key in keys:
        # add() only sets a missing key, so the expiry is not pushed back by later failures.
        cache.add(key, 0, timeout=settings.LOGIN_THROTTLE_WINDOW)
        try:
            cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.set(key, 1, timeout=settings.LOGIN_THROTTLE_WINDOW)


def login_success_reset(*, username: str, ip: str) -> None:
    """A successful sign-in clears the username's counters (from this address and overall);
    the address counter stays, so one valid account cannot reset guessing against others."""
    user_keys = [key for key in _limits(username=username, ip=ip) if not key.startswith(f"{_PREFIX}:ip:")]
    _tolerant(lambda: cache.delete_many(user_keys), None)


def throttle_message() -> str:
    minutes = max(1, math.ceil(settings.LOGIN_THROTTLE_WINDOW / 60))
    unit = "minute" if minutes == 1 else "minutes"
    return f"Too many failed sign-in attempts. For your security, wait {minutes} {unit} and try again."
