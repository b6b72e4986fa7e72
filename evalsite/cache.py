"""Django's Redis cache, where a Redis that cannot be reached is a miss, never an error.

Everything Evalsite caches can be computed again (a run's charts, the last model test, the
worker banner, a document preview) or is a safeguard that must not lock users out (login
throttling counters), so a Redis restart must not turn a page into a 500. One mechanism for
every use of `django.core.cache`, instead of a try/except at each call: a read that fails
is a miss, a write that fails did not happen (`add` and `touch` answer False, as when the
key could not be written), and each failure is logged.

Timeouts keep a Redis that does not answer (a network partition rather than a refused
connection) from holding a request: settings.py sets them in OPTIONS.

`incr` and `decr` still raise: counting on a number that was never stored would invent one
(accounts/throttling.py decides what a failed count means).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache

logger = logging.getLogger(__name__)

# One warning per this many seconds per process: an outage must not flood the log.
WARN_EVERY = 10.0
_warned_at = 0.0


def _failed(operation: str, error: Exception) -> None:
    global _warned_at
    now = time.monotonic()
    if now - _warned_at >= WARN_EVERY:
        _warned_at = now
        logger.warning("Cache %s failed, treated as a miss: Redis cannot be reached (%r)", operation, error)


class ForgivingRedisCache(RedisCache):
    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        try:
            return super().get(key, default, version)
        except redis.RedisError as error:
            _failed("read", error)
            return default

    def get_many(self, keys: Any, version: int | None = None) -> dict[Any, Any]:
        try:
            return super().get_many(keys, version)
        except redis.RedisError as error:
            _failed("read", error)
            return {}

    def has_key(self, key: Any, version: int | None = None) -> bool:
        try:
            return super().has_key(key, version)
        except redis.RedisError as error:
            _failed("read", error)
            return False

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        try:
            super().set(key, value, timeout, version)
        except redis.RedisError as error:
            _failed("write", error)

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        try:
            return super().add(key, value, timeout, version)
        except redis.RedisError as error:
            _failed("write", error)
            return False

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        try:
            return super().touch(key, timeout, version)
        except redis.RedisError as error:
            _failed("write", error)
            return False

    def set_many(self, data: dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list[Any]:
        try:
            return super().set_many(data, timeout, version)
        except redis.RedisError as error:
            _failed("write", error)
            return list(data)  # the keys that were not set, as Django's contract says

    def delete(self, key: Any, version: int | None = None) -> bool:
        try:
            return super().delete(key, version)
        except redis.RedisError as error:
            _failed("delete", error)
            return False

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        try:
            super().delete_many(keys, version)
        except redis.RedisError as error:
            _failed("delete", error)
