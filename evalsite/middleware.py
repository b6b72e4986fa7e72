"""Request and response hardening that applies to every view, in one place.

- `ContentSecurityPolicyMiddleware`: every HTML response gets the policy below, unless its
  view set its own (the sandboxed PDF preview does, datasets/documents.py).
- `NulBytesMiddleware`: a NUL character (U+0000) in the query string, a form field or a JSON
  body is refused with a clear 400 before any view runs. PostgreSQL cannot store NUL in text
  and raised an error (HTTP 500) from half a dozen views; no legitimate input contains one.
  Under /api/ the answer is JSON, elsewhere a short page (or text for htmx requests).
- `ApiJsonErrorsMiddleware`: under /api/, a 404, 405 or 500 that did not come from the API
  itself (an unknown path, a wrong method Django refused, an unexpected error) is JSON too.
- `DatabaseOutageMiddleware`: a request that lost its database connection (a restarted
  PostgreSQL, a terminated session) is run once more when it only reads (GET, HEAD), on a
  fresh connection; otherwise, or if that fails too, it answers 503 with Retry-After and a
  page that reloads itself, never a 500.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.core.exceptions import BadRequest
from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from evalsite.text import contains_nul

logger = logging.getLogger(__name__)

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        # <style> elements only from our files; style="" attributes (progress bar widths) are allowed.
        "style-src 'self'",
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
NUL_MESSAGE = "The request contains a NUL character (\\u0000), which Evalsite does not accept. Remove it and try again."


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        return response


class NulInRequest(BadRequest):
    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


class NulBytesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = _nul_in(request)
        if where:
            return _refuse(request, where)
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return _refuse(request, exception.where) if isinstance(exception, NulInRequest) else None


def _nul_in(request: HttpRequest) -> str:
    """Where a NUL is, or "" if nowhere. Uploaded files may contain NUL: only their names are checked."""
    if b"\x00" in unquote_to_bytes(request.META.get("QUERY_STRING", "")):
        return "query string"
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return ""
    content_type = request.META.get("CONTENT_TYPE", "")
    if content_type.startswith("application/json"):
        try:
            text = request.body.decode("utf-8", errors="replace")
        except Exception:  # too large: Django's own limit answers
            return ""
        # A raw NUL, or the escape \u0000 that json.loads would turn into one.
        return "JSON body" if "\x00" in text or _json_has_nul(text) else ""
    if content_type.startswith("multipart/form-data"):
        # Upload views put their size guard first in request.upload_handlers before anything reads
        # request.POST (datasets/view_helpers.py), so the fields are checked when the view reads them.
        _check_when_parsed(request)
        return ""
    if content_type.startswith("application/x-www-form-urlencoded"):
        try:
            return _nul_in_fields(request)
        except BadRequest:
            return ""  # malformed: Django answers it
    return ""


def _nul_in_fields(request: HttpRequest) -> str:
    for name, values in request.POST.lists():
        if "\x00" in name or any("\x00" in value for value in values):
            return f"form field “{name.replace(chr(0), '')}”"
    for uploads in request.FILES.lists():
        if any("\x00" in (getattr(upload, "name", "") or "") for upload in uploads[1]):
            return "file name"
    return ""


def _check_when_parsed(request: HttpRequest) -> None:
    load = request._load_post_and_files

    def load_and_check() -> None:
        load()
        where = _nul_in_fields(request)
        if where:
            raise NulInRequest(where)

    request._load_post_and_files = load_and_check  # type: ignore[method-assign]


def _json_has_nul(text: str) -> bool:
    if "\\u0000" not in text.lower():
        return False
    try:
        return contains_nul(json.loads(text))
    except (ValueError, RecursionError):
        return False  # not JSON: the view answers that


def _refuse(request: HttpRequest, where: str) -> HttpResponse:
    message = f"{NUL_MESSAGE} (in the {where})"
    if _is_api(request):
        return JsonResponse({"detail": message}, status=400)
    if request.headers.get("HX-Request"):
        return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
    # Rendered without the request: this runs before the session and auth middleware.
    html = render_to_string("400.html", {"message": message})
    return HttpResponse(html, status=400)


class ApiJsonErrorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not _is_api(request) or response.get("Content-Type", "").startswith("application/json"):
            return response
        if response.status_code in (404, 405, 500):
            body: dict[str, object] = {"detail": _API_ERRORS[response.status_code]}
            json_response = JsonResponse(body, status=response.status_code)
            if "Allow" in response:
                json_response["Allow"] = response["Allow"]
            return json_response
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _is_api(request) or settings.DEBUG:
            return None
        logger.error("Internal error in %s %s", request.method, request.path, exc_info=exception)
        return JsonResponse({"detail": _API_ERRORS[500]}, status=500)


_API_ERRORS = {
    404: "Not found.",
    405: "Method not allowed.",
    500: "Internal server error. The details are in the server log.",
}


# Errors of a database that is out of reach (a lost connection, a restart, a terminated
# session); not a query's own mistakes (IntegrityError, ProgrammingError), which stay 500s.
DATABASE_LOST = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 5
# A read is tried again on fresh connections for this long before it is answered 503: a
# PostgreSQL restart refuses connections for a few seconds (the chaos table's poller saw
# 503s while it restarted). A pause between tries, the first one at once.
READ_RETRY_SECONDS = 8.0
READ_RETRY_PAUSE = 0.5
_LOST_ATTRIBUTE = "_evalsite_database_lost"
DATABASE_OUTAGE_MESSAGE = "The database did not answer for a moment."


class DatabaseOutageMiddleware:
    """Listed before the session and authentication middleware, so a connection lost while
    they read the session or the user is handled too. Their errors (and a view's) become a
    500 response below this middleware; `got_request_exception`, sent with it, says which
    error it was (and `process_exception`, for an /api/ view whose error the API middleware
    answers without that signal)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        got_request_exception.connect(_remember_lost, dispatch_uid="evalsite-database-outage")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if getattr(request, _LOST_ATTRIBUTE, None) is None:
            return response
        if request.method in ("GET", "HEAD"):
            # A read changes nothing: run it again on a fresh connection, while the database
            # comes back, for READ_RETRY_SECONDS at most.
            logger.warning("Database connection lost during %s %s; trying once more", request.method, request.path)
            deadline = time.monotonic() + READ_RETRY_SECONDS
            while True:
                _drop_broken_connections()
                setattr(request, _LOST_ATTRIBUTE, None)
                response = self.get_response(request)
                if getattr(request, _LOST_ATTRIBUTE, None) is None:
                    return response
                if time.monotonic() + READ_RETRY_PAUSE >= deadline:
                    break
                time.sleep(READ_RETRY_PAUSE)
        _drop_broken_connections()
        return _unavailable(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> None:
        if isinstance(exception, DATABASE_LOST):
            setattr(request, _LOST_ATTRIBUTE, exception)


def _remember_lost(sender: object, request: HttpRequest | None = None, **kwargs: object) -> None:
    import sys

    error = sys.exc_info()[1]
    if request is not None and isinstance(error, DATABASE_LOST):
        setattr(request, _LOST_ATTRIBUTE, error)


def _drop_broken_connections() -> None:
    """Close the connections that can no longer be used, so the next query opens a fresh one.
    Not one inside a transaction (a test's): closing it would end the transaction."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


def _unavailable(request: HttpRequest) -> HttpResponse:
    if request.method in ("GET", "HEAD"):
        advice = f"This page reloads itself in {RETRY_AFTER_SECONDS} seconds."
    else:
        advice = "What you sent may not have been saved: check, then send it again."
    message = f"{DATABASE_OUTAGE_MESSAGE} {advice}"
    if _is_api(request):
        response: HttpResponse = JsonResponse({"detail": message}, status=503)
    elif request.headers.get("HX-Request"):
        # htmx leaves the page as it is on an error answer; a polling part asks again on its own.
        response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
    else:
        # Rendered without the request: the session and the user live in the database.
        context = {"advice": advice, "seconds": RETRY_AFTER_SECONDS, "reload": request.get_full_path()}
        response = HttpResponse(render_to_string("503.html", context), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response
