"""Deployment checks for sign-in throttling (`manage.py check --deploy`, `make check-deploy`).

Behind a reverse proxy that LOGIN_TRUSTED_PROXIES does not count, every client reaches the
site from the proxy's address, so sign-in throttling counts them all as one: an attacker's
failed sign-ins lock a username for everyone whose browser is not yet known to the site
(accounts/throttling.py). Two signs of it are warned of: SECURE_PROXY_SSL_HEADER, which says
a proxy sets X-Forwarded-Proto, and requests that arrived with X-Forwarded-For or Forwarded
in the last day (noted in the cache by the web processes).
"""

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register

from accounts import throttling

_HINT = (
    "Set LOGIN_TRUSTED_PROXIES to the number of reverse proxies in front of the site (1 behind one "
    "nginx or load balancer), so each client is throttled by its own address (docs/deploy.md)."
)


@register(Tags.security, deploy=True)
def login_proxy_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if settings.LOGIN_TRUSTED_PROXIES > 0:
        return []
    found: list[CheckMessage] = []
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None):
        found.append(
            Warning(
                "SECURE_PROXY_SSL_HEADER says a proxy is in front of the site, but LOGIN_TRUSTED_PROXIES is 0: "
                "sign-in throttling sees every client at the proxy's address.",
                hint=_HINT,
                id="accounts.W001",
            )
        )
    # The web processes note it in Redis; with no Redis configured and the embedded one not running
    # (a check run on its own, as make check-deploy's), none has run, and nothing is asked.
    redis_up = bool(settings.REDIS_URL) or Path(settings.EMBEDDED_REDIS_SOCKET).exists()
    seen = throttling.proxy_headers_seen() if redis_up else None
    if seen:
        found.append(
            Warning(
                f"Requests from {seen} arrived with X-Forwarded-For or Forwarded in the last day, but "
                "LOGIN_TRUSTED_PROXIES is 0: sign-in throttling sees every client behind it at one address.",
                hint=_HINT,
                id="accounts.W002",
            )
        )
    return found
