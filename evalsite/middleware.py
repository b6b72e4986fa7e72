"""Request and response hardening that applies to every view, in one place.

- `ContentSecurityPolicyMiddleware`: every HTML response gets the policy below, unless its
  view set its own (the sandboxed PDF preview does, datasets/documents.py).
- `NulBytesMiddleware`: a NUL character (U+0000) in the query string, a form field or a JSON
  body is refused with a clear 400 before any view runs. PostgreSQL cannot store NUL in text
  and raised an error (HTTP 500) from half a dozen views; no legitimate input contains one.
  Under /api/ the answer is JSON, elsewhere a short page (or text for htmx requests).
- `ApiJsonErrorsMiddleware`: under /api/, a 404, 405 or 500 that did not come from the API
  itself (an unknown path, a wrong method Django refused, an unexpected error) is JSON too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.core.exceptions import BadRequest
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
