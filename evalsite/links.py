"""Absolute links that leave the page: in exports, the CLI's reports, document links
sent to http agents.

SITE_URL when it is set. Otherwise the request's own scheme and host where there is a
request (an export downloaded from the console links back to the address the user
used), else the address the stack serves (HOST and PORT, as `make run` and
`manage.py runstack` set them for their processes): see evalsite/settings.py.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def site_url(request: HttpRequest | None = None) -> str:
    if request is not None and not settings.SITE_URL_EXPLICIT:
        return request.build_absolute_uri("/").rstrip("/")
    return str(settings.SITE_URL).rstrip("/")


def absolute(path: str, request: HttpRequest | None = None) -> str:
    return site_url(request) + path
