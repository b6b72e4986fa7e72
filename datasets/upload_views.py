"""The Generate Dataset page (upload), the extraction status poll, and documents.

Upload views are `size_guarded` (view_helpers.py): the size cap goes in before anything
reads the body, and the CSRF token is still checked after it (Django docs, "Modifying
upload handlers on the fly").
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING, trigger_client_event

from agents.models import Agent
from datasets import documents, preview_marks
from datasets.extraction.services import dataset_upload_create
from datasets.models import Dataset, Document, TestCase
from datasets.upload_forms import DatasetUploadForm, DocumentUploadForm, UploadSizeGuard
from datasets.view_helpers import (
    add_service_errors,
    get_agent_for_user,
    get_case_for_user,
    get_dataset_for_user,
    needs_model,
    size_guarded,
)
from evalsite.http import AuthedRequest, is_partial, navigate


def _get_document_for_user(
    request: AuthedRequest, agent_id: int, dataset_id: int, document_id: int
) -> tuple[Agent, Dataset, Document]:
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    # Through the dataset, and the team as a second lock: a document id alone opens nothing.
    document = Document.objects.filter(pk=document_id, dataset=dataset, team_id=agent.team_id).first()
    if document is None:
        raise Http404("No such document")
    return agent, dataset, document


# ---- Generate Dataset ---------------------------------------------------------------


def _new_context(
    agent: Agent, form: DatasetUploadForm, tab: str, *, kept_file: str = "", file_step: bool = False
) -> dict[str, Any]:
    max_bytes = settings.UPLOAD_MAX_BYTES
    return {
        "agent": agent,
        "form": form,
        "tab": tab,
        "max_bytes": max_bytes,
        "max_mb": f"{max_bytes / 1_000_000:g}",
        # After an error: the step to show. The browser keeps the file only through an htmx
        # swap (hx-preserve), so a refused name stays on step 2 there and nowhere else.
        "kept_file": kept_file,
        "start_step": "2" if kept_file else ("1" if file_step or not form.errors else "all"),
        "needs_model": needs_model(form),
    }


def _kept_file(request: AuthedRequest, form: DatasetUploadForm) -> str:
    """The chosen file's name when the page keeps it (htmx) and nothing is wrong with it."""
    upload = request.FILES.get("file")
    if not request.htmx or upload is None or "file" in form.errors or form.non_field_errors():
        return ""
    return upload.name or ""


@login_required
@require_GET
def dataset_new(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = get_agent_for_user(request, agent_id)
    tab = "generate" if request.GET.get("tab") == "generate" else "upload"
    return render(request, "datasets/new.html", _new_context(agent, DatasetUploadForm(), tab))


@login_required
@require_POST
@size_guarded
def dataset_upload(request: AuthedRequest, agent_id: int, guard: UploadSizeGuard) -> HttpResponse:
    agent = get_agent_for_user(request, agent_id)
    form = DatasetUploadForm(request.POST, request.FILES, too_big=guard.too_big)
    if form.is_valid():
        try:
            dataset = dataset_upload_create(
                agent=agent,
                user=request.user,
                name=form.cleaned_data["name"],
                upload=form.cleaned_data["file"],
                validated=form.validated,
                agent_reads_source=form.cleaned_data["agent_reads_source"],
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            url = reverse("datasets:detail", args=[agent.pk, dataset.pk])
            return navigate(request, url)
    file_step = bool(request.htmx) and "file" in form.errors  # the file is wrong: choose another
    context = _new_context(agent, form, "upload", kept_file=_kept_file(request, form), file_step=file_step)
    template = "datasets/new.html#upload_form" if request.htmx else "datasets/new.html"
    return render(request, template, context)


# ---- extraction status ------------------------------------------------------------


@login_required
@require_GET
def dataset_status(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    """The self-polling status box; 286 stops the polling once the dataset has settled."""
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    response = render(request, "datasets/partials/dataset_status.html", {"agent": agent, "dataset": dataset})
    if dataset.is_settled:
        response.status_code = HTMX_STOP_POLLING
        if is_partial(request):
            if dataset.status == Dataset.Status.REVIEW:
                # The file is read: the user's next step is the mapping page.
                response["HX-Redirect"] = reverse("datasets:mapping", args=[agent.pk, dataset.pk])
            else:
                # The poll saw the change: reload the page so the cases and actions appear with it.
                response["HX-Refresh"] = "true"
    return response


# ---- documents -----------------------------------------------------------------------


@login_required
@require_GET
def document_download(request: AuthedRequest, agent_id: int, dataset_id: int, document_id: int) -> FileResponse:
    _, _, document = _get_document_for_user(request, agent_id, dataset_id, document_id)
    try:
        return documents.download_response(document)
    except FileNotFoundError:
        raise Http404("The file is missing from storage") from None


@login_required
@require_GET
@xframe_options_sameorigin  # shown in the preview dialog's <iframe>; the page itself stays DENY
def document_view(request: AuthedRequest, agent_id: int, dataset_id: int, document_id: int) -> FileResponse:
    _, _, document = _get_document_for_user(request, agent_id, dataset_id, document_id)
    try:
        response = documents.pdf_inline_response(document)
    except FileNotFoundError:
        response = None
    if response is None:
        raise Http404("Only PDFs open in the browser; download other files")
    return response


@login_required
@require_GET
def document_preview(request: AuthedRequest, agent_id: int, dataset_id: int, document_id: int) -> HttpResponse:
    agent, dataset, document = _get_document_for_user(request, agent_id, dataset_id, document_id)
    case = (
        dataset.cases.filter(pk=request.GET.get("case") or 0).first() if request.GET.get("case", "").isdigit() else None
    )
    is_pdf = document.file_type == Document.FileType.PDF
    show = request.GET.get("show", "")
    place = preview_marks.source_place(case)
    # A PDF opens in the browser's viewer at the case's page; "Page text" shows that page's
    # text with the evidence marked (the viewer itself cannot mark it).
    page_text = is_pdf and show == "text" and place is not None and place.unit == "page"
    blocks, problem = ([], "") if is_pdf and not page_text else documents.preview_blocks(document)
    blocks, marked = preview_marks.mark_source(blocks, case)
    page_pieces = None
    if page_text and place is not None:
        page = next((block for block in blocks if block.get("page") == place.number), None)
        blocks = [page] if page else []
        page_pieces = preview_marks.page_pieces(page["text"], case.source_span) if page and case else None
    context = {
        "agent": agent,
        "dataset": dataset,
        "document": document,
        "case": case,
        "blocks": blocks,
        "problem": problem,
        "is_pdf": is_pdf,
        "show": show if show in ("context", "text") else "preview",
        "as_page": not request.htmx,
        "has_context": bool(case and (case.document_context or case.source_span)),
        "place": place,
        "marked": marked,
        "page_text": page_text,
        "page_pieces": page_pieces,
        "is_source": bool(case and case.source_document_id == document.pk),
    }
    if is_partial(request):
        return render(request, "datasets/partials/document_preview.html", context)
    return render(request, "datasets/document_preview.html", context)


# ---- documents on cases ------------------------------------------------------------------


@login_required
@require_POST
@size_guarded
def case_document_attach(
    request: AuthedRequest, agent_id: int, dataset_id: int, case_pk: int, guard: UploadSizeGuard
) -> HttpResponse:
    agent, dataset, case = get_case_for_user(request, agent_id, dataset_id, case_pk)
    form = DocumentUploadForm(request.POST, request.FILES, too_big=guard.too_big)
    attached = None
    if form.is_valid():
        try:
            attached = documents.case_document_attach(
                case=case, upload=form.cleaned_data["file"], validated=form.validated
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
    if not request.htmx:
        for error in form.errors.get("file", []) + form.non_field_errors():
            messages.error(request, str(error))  # ErrorList yields str; its stubs also allow ValidationError
        if attached:
            messages.success(request, f"Attached {attached.original_name}.")
        return redirect("datasets:detail", agent.pk, dataset.pk)
    response = _case_documents(request, agent, dataset, case, form if attached is None else DocumentUploadForm())
    if attached:
        trigger_client_event(response, "casesChanged")
        trigger_client_event(response, "toast", {"message": f"Attached {attached.original_name}.", "level": "success"})
    return response


@login_required
@require_POST
def case_document_detach(
    request: AuthedRequest, agent_id: int, dataset_id: int, case_pk: int, document_id: int
) -> HttpResponse:
    agent, dataset, case = get_case_for_user(request, agent_id, dataset_id, case_pk)
    document = case.documents.filter(pk=document_id).first()
    if document is None:
        raise Http404("The document is not attached to this case")
    documents.case_document_detach(case=case, document=document)
    if not request.htmx:
        messages.success(request, f"Removed {document.original_name} from the test case.")
        return redirect("datasets:detail", agent.pk, dataset.pk)
    response = _case_documents(request, agent, dataset, case, DocumentUploadForm())
    trigger_client_event(response, "casesChanged")
    return trigger_client_event(
        response, "toast", {"message": f"Removed {document.original_name}.", "level": "success"}
    )


def _case_documents(
    request: AuthedRequest, agent: Agent, dataset: Dataset, case: TestCase, form: DocumentUploadForm
) -> HttpResponse:
    context = {"agent": agent, "dataset": dataset, "case": case, "attach_form": form}
    return render(request, "datasets/partials/case_documents.html", context)
