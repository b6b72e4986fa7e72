"""Login throttling: refuse sign-in after too many failures per username and per address.

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


def _keys(*, username: str, ip: str) -> list[str]:
    # Hash the username: cache keys must be short and free of spaces/control characters.
    user_key = hashlib.sha256(username.strip().lower().encode()).hexdigest()
    return [f"{_PREFIX}:user:{user_key}", f"{_PREFIX}:ip:{ip}"]


def client_ip(request: HttpRequest) -> str:
    """The peer address. X-Forwarded-For is not trusted: any client could forge it."""
    return request.META.get("REMOTE_ADDR") or "unknown"


def login_is_throttled(*, username: str, ip: str) -> bool:
    limit = settings.LOGIN_THROTTLE_ATTEMPTS
    counts: dict[str, Any] = _tolerant(lambda: cache.get_many(_keys(username=username, ip=ip)), {})
    return any(count >= limit for count in counts.values())


def login_failure_record(*, username: str, ip: str) -> None:
    """Count one failure. The window starts at the first failure (a fixed window)."""
    _tolerant(lambda: _record(_keys(username=username, ip=ip)), None)


def _record(keys: list[str]) -> None:
    for key in keys:
        # add() only sets a missing key, so the expiry is not pushed back by later failures.
        cache.add(key, 0, timeout=settings.LOGIN_THROTTLE_WINDOW)
        try:
            cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.set(key, 1, timeout=settings.LOGIN_THROTTLE_WINDOW)


def login_success_reset(*, username: str) -> None:
    """A successful sign-in clears the username's counter; the address counter stays,
    so one valid account cannot be used to reset guessing against others."""
    _tolerant(lambda: cache.delete(_keys(username=username, ip="")[0]), False)


def throttle_message() -> str:
    minutes = max(1, math.ceil(settings.LOGIN_THROTTLE_WINDOW / 60))
    unit = "minute" if minutes == 1 else "minutes"
    return f"Too many failed sign-in attempts. For your security, wait {minutes} {unit} and try again."
