from django.contrib.auth.models import User
from django.http import HttpRequest
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
