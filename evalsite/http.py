from django.contrib.auth.models import User
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from accounts.models import ApiToken, Team


class AuthedRequest(HttpRequest):
    """The request our views see: logged in, with htmx details and the current team."""

    htmx: HtmxDetails
    user: User
    team: Team | None


class ApiRequest(HttpRequest):
    """The request an API view sees: TokenAuth (evalsite.api) has set the user to the token's owner."""

    user: User
    auth: ApiToken


def is_partial(request: AuthedRequest) -> bool:
    """Answer with the fragment, not the page: an htmx request, except a history restore
    (htmx asks for the whole page when its history cache misses)."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def navigate(request: AuthedRequest, url: str) -> HttpResponse:
    """Go to `url` after a POST: htmx follows a client redirect, a plain form a redirect."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def document_link_refused(error: signing.BadSignature) -> HttpResponse:
    """The answer to a signed document link that cannot be followed: 410 once it has expired,
    else 403 (altered or not ours). Plain text: an HTTP agent reads it, not a person."""
    if isinstance(error, signing.SignatureExpired):
        return HttpResponse("This document link has expired.", status=410, content_type="text/plain")
    return HttpResponse("This document link is not valid.", status=403, content_type="text/plain")
