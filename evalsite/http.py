from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

from accounts.models import Team


class AuthedRequest(HttpRequest):
    """The request our views see: logged in, with htmx details and the current team."""

    htmx: HtmxDetails
    user: User
    team: Team | None
