"""The mapping step of an upload: how the file's columns become case fields, confirmed by the user.

GET shows the tables found (header row, a field per column, the first rows and what they
become, skipped sheets with their reason) while the dataset is in Review; POST confirms
(the job then creates the cases), or with "preview" only shows the result of the fields
chosen (the page posts it when a field changes), or, on the cancel URL, deletes the upload.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

from agents.models import Agent
from datasets.extraction import mapping
from datasets.extraction.mapping import dataset_mapping_confirm, dataset_upload_cancel
from datasets.models import Dataset
from datasets.upload_forms import MappingForm
from datasets.view_helpers import add_service_errors, get_dataset_for_user
from evalsite.http import AuthedRequest


def _context(agent: Agent, dataset: Dataset, form: MappingForm) -> dict[str, Any]:
    state = dataset.mapping
    total, limit = state.get("total", 0), state.get("limit", 0)
    return {
        "agent": agent,
        "dataset": dataset,
        "form": form,
        "tables": form.rows(),
        "total": total,
        "limit": limit,
        "over_limit": total > limit,
        "warnings": state.get("warnings", []),
        "problem": state.get("problem", ""),
        "omitted": max(total - limit, 0),
        # Rows whose steps quote no user message (a model can write it, when one is connected).
        "unquoted": sum(table.get("unquoted", 0) for table in state.get("tables", []) if not table["skipped"]),
    }


@login_required
@require_http_methods(["GET", "POST"])
def dataset_mapping(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    detail_url = reverse("datasets:detail", args=[agent.pk, dataset.pk])
    if dataset.status != Dataset.Status.REVIEW:
        return HttpResponseClientRedirect(detail_url) if request.htmx else redirect(detail_url)
    tables = dataset.mapping.get("tables", [])
    form = MappingForm(request.POST or None, tables=tables)
    if request.method == "POST" and "preview" in request.POST:
        # A field changed: show what the first rows become, and what is wrong, without creating anything.
        if form.is_valid():
            _check(form, tables)
    elif request.method == "POST" and form.is_valid():
        try:
            dataset_mapping_confirm(
                dataset=dataset,
                chosen=form.chosen(),
                keep_first=form.cleaned_data["keep_first"],
                derive_questions=form.cleaned_data["derive_questions"],
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, "Creating the test cases with your mapping…")
            return HttpResponseClientRedirect(detail_url) if request.htmx else redirect(detail_url)
    template = "datasets/mapping.html#mapping_form" if request.htmx else "datasets/mapping.html"
    return render(request, template, _context(agent, dataset, form))


def _check(form: MappingForm, tables: list[dict[str, Any]]) -> None:
    try:
        mapping.mapping_check(tables=tables, chosen=form.chosen())
    except ValidationError as exc:
        add_service_errors(form, exc)


@login_required
@require_POST
def dataset_mapping_cancel(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    try:
        dataset_upload_cancel(dataset=dataset)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("datasets:detail", agent.pk, dataset.pk)
    messages.success(request, f"Cancelled the upload of “{dataset.source_name}”. Nothing was created.")
    return redirect("datasets:list", agent.pk)


@login_required
@require_POST
def dataset_warnings_dismiss(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    mapping.dataset_warnings_dismiss(dataset=dataset)
    if request.htmx:
        return HttpResponseClientRefresh()  # the badge in the page head changes too
    messages.success(request, "Import warnings marked as read. Each case keeps its own.")
    return redirect("datasets:detail", agent.pk, dataset.pk)
