"""`GET /healthz`: is each part of the console up? For load balancers, compose and people.

No login (it says nothing secret: up or down, and how long ago a worker answered).
200 when web, database, Redis and at least one worker are up; 503 with the same JSON
when any is down, naming which.
"""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from evalsite import workers


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, dict[str, Any]] = {"web": {"ok": True}}
    checks["database"] = _database()
    checks["redis"] = _redis()
    checks["worker"] = _worker() if checks["database"]["ok"] else {"ok": False, "error": "database unreachable"}
    ok = all(check["ok"] for check in checks.values())
    return JsonResponse({"ok": ok, **checks}, status=200 if ok else 503)


def redis_check() -> dict[str, Any]:
    """Whether Redis answers, as /healthz says it (the run page's stall note reads it too)."""
    return _redis()


def worker_check() -> dict[str, Any]:
    """Whether a worker is alive, as /healthz says it."""
    return _worker()


def _database() -> dict[str, Any]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True}
    except Exception as error:
        return {"ok": False, "error": type(error).__name__}


def _redis() -> dict[str, Any]:
    client = redis.Redis.from_url(settings.REDIS_CLIENT_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
        return {"ok": True}
    except redis.RedisError as error:
        return {"ok": False, "error": type(error).__name__}
    finally:
        client.close()


def _worker() -> dict[str, Any]:
    try:
        age = workers.last_heartbeat_age()
        live = len(workers.live_worker_ids())
    except Exception as error:
        return {"ok": False, "error": type(error).__name__}
    seen = None if age is None else round(age, 1)
    return {"ok": live > 0, "workers": live, "last_seen_seconds_ago": seen}
