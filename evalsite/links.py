"""Absolute links that leave the page: in exports, the CLI's reports, document links
sent to http agents.

SITE_URL when it is set. Otherwise the request's own scheme and host where there is a
request (an export downloaded from the console links back to the address the user
used), else the address the stack serves (HOST and PORT, as `make run` and
`manage.py runstack` set them for their processes): see evalsite/settings.py.

A command run from another shell (`manage.py evalrun` beside `make run PORT=8104`) has no
request and none of the stack's HOST and PORT: it links to the address the running stack
recorded (`served_url_record`, var/served-url), unless SITE_URL, HOST or PORT say otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest


def site_url(request: HttpRequest | None = None) -> str:
    if request is not None and not settings.SITE_URL_EXPLICIT:
        return request.build_absolute_uri("/").rstrip("/")
    return str(settings.SITE_URL).rstrip("/")


def absolute(path: str, request: HttpRequest | None = None) -> str:
    return site_url(request) + path


def served_url(host: str, port: int) -> str:
    """http://HOST:PORT as a browser on this machine reaches it (settings._served_url's rule)."""
    if host in ("0.0.0.0", "::"):  # every interface: the loopback one is always among them
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def served_url_file() -> Path:
    return Path(getattr(settings, "EVALSITE_SERVED_URL_FILE", None) or settings.BASE_DIR / "var" / "served-url")


def served_url_record(url: str) -> None:
    """What `runstack` serves, for the commands run beside it: its address and its process id."""
    path = served_url_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{url.rstrip('/')} {os.getpid()}\n", encoding="utf-8")


def served_url_forget() -> None:
    served_url_file().unlink(missing_ok=True)


def command_site_url() -> str:
    """The address a management command links to: SITE_URL, or this process's own HOST/PORT when
    it was given them, else the address of the stack running on this machine, else SITE_URL's
    default (http://127.0.0.1:8000)."""
    if settings.SITE_URL_EXPLICIT or os.environ.get("PORT") or os.environ.get("HOST"):
        return site_url()
    return _recorded_served_url() or site_url()


def _recorded_served_url() -> str:
    try:
        url, pid = served_url_file().read_text(encoding="utf-8").split()
        os.kill(int(pid), 0)  # a stack that died without cleaning up serves nothing any more
    except (OSError, ValueError):
        return ""
    return url.rstrip("/")
