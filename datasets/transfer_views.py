"""Importing a CSV or EvalSet JSON file into a dataset, and exporting one (the dialog
pattern of views.py; the upload size guard of view_helpers.py)."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods

from datasets import exporters, services
from datasets.forms import ImportForm
from datasets.upload_forms import UploadSizeGuard
from datasets.view_helpers import dialog_done, form_response, get_dataset_for_user, size_guarded, upload_data
from evalsite.http import AuthedRequest


def _import(request: AuthedRequest, agent_id: int, dataset_id: int, kind: str, guard: UploadSizeGuard) -> HttpResponse:
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    data, files = upload_data(request)
    form = ImportForm(data, files, kind=kind, too_big=guard.too_big)
    if request.method == "POST" and form.is_valid():
        importer = services.dataset_import_csv if kind == "csv" else services.dataset_import_json
        try:
            result = importer(dataset=dataset, file=form.cleaned_data["file"])
        except ValidationError as exc:
            form.add_error("file", exc)
        else:
            detail_url = reverse("datasets:detail", args=[agent.pk, dataset.pk])
            return dialog_done(
                request, message=result.message, next_url=detail_url, events=("casesChanged",), level=result.level
            )
    context = {"agent": agent, "dataset": dataset, "form": form, "kind": kind}
    title = "Import CSV" if kind == "csv" else "Import EvalSet JSON"
    return form_response(request, form_template="datasets/partials/import_form.html", title=title, context=context)


@login_required
@require_http_methods(["GET", "POST"])
@size_guarded
def import_csv(request: AuthedRequest, agent_id: int, dataset_id: int, guard: UploadSizeGuard) -> HttpResponse:
    return _import(request, agent_id, dataset_id, "csv", guard)


@login_required
@require_http_methods(["GET", "POST"])
@size_guarded
def import_json(request: AuthedRequest, agent_id: int, dataset_id: int, guard: UploadSizeGuard) -> HttpResponse:
    return _import(request, agent_id, dataset_id, "json", guard)


def _attachment(content: str, *, filename: str, content_type: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    return response


@login_required
@require_GET
def export_csv(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    _agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    content = exporters.dataset_export_csv(dataset=dataset)
    return _attachment(
        content, filename=exporters.export_filename(dataset, "csv"), content_type="text/csv; charset=utf-8"
    )


@login_required
@require_GET
def export_json(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    _agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    content = json.dumps(services.dataset_export_json(dataset=dataset), ensure_ascii=False, indent=2)
    return _attachment(content, filename=exporters.export_filename(dataset, "json"), content_type="application/json")
