"""The JSON API (django-ninja): token auth, one router per app, OpenAPI at /api/docs."""

import logging

from django.conf import settings
from django.core.exceptions import (
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import Http404, HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.utils import timezone
from ninja import NinjaAPI
from ninja.security import HttpBearer

from accounts.models import ApiToken
from evalsite import paging


def _refuse_ids_out_of_range(request: HttpRequest) -> None:
    """404 for a path id the database cannot hold (past 2**63 - 1), before any operation runs:
    a lookup through a foreign key (`team_id=...`) fails the query with it instead of finding
    nothing (issue 48), and every operation's ids pass this door."""
    match = request.resolver_match
    kwargs = match.kwargs if match else {}
    # django-ninja hands its path parameters over as text and converts them itself, later.
    ids = [int(value) for name, value in kwargs.items() if name.endswith("_id") and str(value).isdigit()]
    if not paging.in_range(*ids):
        raise Http404("Not Found")


class TokenAuth(HttpBearer):
    """`Authorization: Bearer evs_…`; sets request.user to the token's owner."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        _refuse_ids_out_of_range(request)
        if not token.startswith(ApiToken.PREFIX):
            return None  # not one of ours: skip the database
        api_token = (
            ApiToken.objects.select_related("user")
            .filter(token_hash=ApiToken.hash(token), revoked_at__isnull=True, user__is_active=True)
            .first()
        )
        if api_token is None:
            return None
        # One write per request at most: refresh the "last used" time once a minute.
        now = timezone.now()
        if api_token.last_used_at is None or (now - api_token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
        request.user = api_token.user
        return api_token


api = NinjaAPI(title="Evalsite API", version="1", auth=TokenAuth(), docs_url="/docs", urls_namespace="api")

MULTIPART_UNREADABLE = (
    "The request body cannot be read as multipart/form-data ({error}). Send the file with a "
    "Content-Type of multipart/form-data and its boundary (curl -F and every HTTP client's "
    "files= do), and a body that uses that boundary."
)


@api.exception_handler(MultiPartParserError)
def multipart_unreadable(request: HttpRequest, error: MultiPartParserError) -> HttpResponse:
    """A multipart body Django cannot parse (no boundary, a body cut short) is the client's
    mistake: a 400 that says so. An operation reads request.POST itself, so without this the
    parser's error was a 500 (issue 48: POST .../datasets/upload without a boundary)."""
    return api.create_response(request, {"detail": MULTIPART_UNREADABLE.format(error=error)}, status=400)


@api.exception_handler(SuspiciousOperation)
def request_refused(request: HttpRequest, error: SuspiciousOperation) -> HttpResponse:
    """Too many fields or files, a body past DATA_UPLOAD_MAX_MEMORY_SIZE: a 400, as Django answers
    them on the pages (its handler never sees them here: the API's middleware made them 500s),
    logged to django.security like Django's."""
    logging.getLogger(f"django.security.{error.__class__.__name__}").error(str(error))
    if isinstance(error, TooManyFilesSent):
        detail = f"Too many files in one request: at most {settings.DATA_UPLOAD_MAX_NUMBER_FILES}."
    elif isinstance(error, TooManyFieldsSent):
        detail = f"Too many form fields in one request: at most {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS}."
    elif isinstance(error, RequestDataTooBig):
        detail = f"The request's fields are too large: at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
    else:
        detail = str(error) or "The request was refused."
    return api.create_response(request, {"detail": detail}, status=400)


# Routers register themselves here, one line per app.
from accounts.api import router as accounts_router  # noqa: E402
from agents.api import router as agents_router  # noqa: E402
from datasets.api import router as datasets_router  # noqa: E402
from datasets.api_actions import router as datasets_actions_router  # noqa: E402
from monitoring.api import router as monitoring_router  # noqa: E402
from monitoring.api_evaluators import router as monitoring_evaluators_router  # noqa: E402
from monitoring.api_ingest import router as monitoring_ingest_router  # noqa: E402
from monitoring.api_settings import router as monitoring_settings_router  # noqa: E402
from playground.api import router as playground_router  # noqa: E402
from reviews.api import router as reviews_router  # noqa: E402
from reviews.api_cases import router as reviews_cases_router  # noqa: E402
from runs.api import router as runs_router  # noqa: E402
from runs.api_compare import router as runs_compare_router  # noqa: E402
from runs.api_coverage import router as runs_coverage_router  # noqa: E402
from suggestions.api import router as suggestions_router  # noqa: E402

api.add_router("/", accounts_router)
api.add_router("/", agents_router)
# Before datasets_router: its /datasets/generate and /datasets/upload would read as a {dataset_id}.
api.add_router("/", datasets_actions_router)
api.add_router("/", datasets_router)
api.add_router("/", runs_router)
api.add_router("/", runs_compare_router)
api.add_router("/", runs_coverage_router)
api.add_router("/", reviews_router)
api.add_router("/", playground_router)
api.add_router("/", reviews_cases_router)
api.add_router("/", suggestions_router)
api.add_router("/", monitoring_ingest_router)
api.add_router("/", monitoring_router)
api.add_router("/", monitoring_evaluators_router)
api.add_router("/", monitoring_settings_router)
