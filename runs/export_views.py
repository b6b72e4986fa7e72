"""A run's downloads: the exports (JSON, CSV, XLSX, HTML report) and the signed document link
an HTTP agent fetches a case's attachment with."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import FileResponse, Http404, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from agents.models import Agent
from agents.selectors import agent_get_for_user
from datasets.documents import download_response
from datasets.models import Document
from evalsite import paging
from evalsite.http import AuthedRequest, document_link_refused
from evalsite.links import site_url
from runs import selectors
from runs.engine import case as engine
from runs.models import Run
from runs.reports import exporters, xlsx_export


def _get_run_for_user(request: AuthedRequest, agent_id: int, run_id: int) -> tuple[Agent, Run]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    return agent, selectors.run_get(agent=agent, run_id=run_id)


# ---- exports ------------------------------------------------------------------------


# A run's exports, for the page and the API: how each file is made from the run and the site's
# address its links start with (the page's request; None: SITE_URL), and its content type.
EXPORTS: dict[str, tuple[Callable[[Run, str | None], bytes | str], str]] = {
    "json": (lambda run, site: exporters.run_export_json(run, site_url=site), "application/json"),
    # A byte-order mark, so spreadsheet programs read the file as UTF-8.
    "csv": (lambda run, site: "\ufeff" + exporters.run_export_csv(run), "text/csv; charset=utf-8"),
    "xlsx": (
        lambda run, site: xlsx_export.run_export_xlsx(run, site_url=site),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    "html": (lambda run, site: exporters.run_export_html(run, site_url=site), "text/html; charset=utf-8"),
}


def export_response(run: Run, fmt: str, *, site: str | None) -> HttpResponse:
    """The run as a file to download in the format `fmt` (a key of EXPORTS)."""
    make, content_type = EXPORTS[fmt]
    response = HttpResponse(make(run, site), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{exporters.export_filename(run, fmt)}"'
    return response


def _export(request: AuthedRequest, agent_id: int, run_id: int, fmt: str) -> HttpResponse:
    _, run = _get_run_for_user(request, agent_id, run_id)
    return export_response(run, fmt, site=site_url(request))


@login_required
@require_GET
def export_json(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    return _export(request, agent_id, run_id, "json")


@login_required
@require_GET
def export_csv(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    return _export(request, agent_id, run_id, "csv")


@login_required
@require_GET
def export_xlsx(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    return _export(request, agent_id, run_id, "xlsx")


@login_required
@require_GET
def export_html(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    return _export(request, agent_id, run_id, "html")


# ---- documents for HTTP agents ------------------------------------------------------------


@never_cache
@require_GET
def document_signed(request: AuthedRequest, agent_id: int, token: str) -> HttpResponse | FileResponse:
    """A case document for an HTTP agent: no login, but a signed link that expires
    (EVALSITE_DOCUMENT_URL_TTL) and names the run it was made for."""
    try:
        claims = engine.document_token_load(token)
    except signing.BadSignature as error:
        return document_link_refused(error)
    if not paging.in_range(agent_id):
        raise Http404("No such document")
    # Both keys are always there: engine.document_url is the only signer with this salt.
    run = Run.objects.select_related("agent").filter(pk=claims["r"], agent_id=agent_id).first()
    document = Document.objects.filter(pk=claims["d"]).first()
    if run is None or document is None or document.team_id != run.agent.team_id or not document.file:
        raise Http404("No such document")
    # Always a download, never rendered on our origin (check 8 in docs/architecture.md).
    try:
        return download_response(document)
    except FileNotFoundError as exc:
        raise Http404("The document's file is gone") from exc
