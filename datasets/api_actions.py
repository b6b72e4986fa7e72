"""JSON API for the dataset pages' actions beyond datasets/api.py: generate a dataset with AI,
upload a document or spreadsheet, cancel an upload waiting for its mapping, dismiss import
warnings, import and export CSV / EvalSet JSON, move a case, attach and detach a case's
documents. The same forms, services and messages as the pages (datasets/views.py,
transfer_views.py, upload_views.py, mapping_views.py, generation/views.py).

Files are posted as multipart/form-data and read after the upload size guard is installed, as
on the pages, so an upload over the limit is refused before it is stored. Bad input is a 422 in
the shape of datasets/api.py; another team's dataset or case is a 404.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from django.core.exceptions import ValidationError
from django.forms import Form
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.http import content_disposition_header
from ninja import Field, Router, Schema, Status
from ninja.errors import ValidationError as NinjaValidationError

from datasets import documents, exporters, selectors, services
from datasets.api import (
    DATASET,
    DATASETS,
    ITEM,
    DatasetOut,
    DocumentOut,
    NotFoundOut,
    ValidationErrorOut,
    _agent,
    _dataset,
    _invalid,
    _item,
    _user,
)
from datasets.extraction import mapping
from datasets.extraction.services import dataset_upload_create
from datasets.forms import ImportForm
from datasets.generation.forms import GenerateForm
from datasets.generation.services import NO_MODEL_MESSAGE, dataset_generate_create
from datasets.models import Dataset, Document
from datasets.upload_forms import DatasetUploadForm, DocumentUploadForm
from datasets.view_helpers import install_upload_guard
from evalsite import llm
from evalsite.api_errors import refusal
from evalsite.idempotency import idempotency_header, idempotent_create, loader, upload_body
from evalsite.schemas import StrictSchema

router = Router(tags=["datasets"])

IDEMPOTENCY = idempotency_header()


class DatasetGenerateIn(StrictSchema):
    name: str = Field(description="The new dataset's name, unique for the agent")
    count: int = Field(10, description="Test cases to write")
    instructions: str = Field("", description="What to focus on (at most 2000 characters)")
    kind: Literal["questions", "scenarios"] = Field("questions", description="questions | scenarios")


class MoveIn(StrictSchema):
    direction: Literal["up", "down", "top", "bottom"]


class MovedOut(Schema):
    id: int
    number: int = Field(description="The case's 1-based place in the dataset's order after the move")


class MessageOut(Schema):
    message: str
    level: str = Field("success", description="success | warning | info")


def _multipart(*fields: tuple[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    """The OpenAPI request body of a file upload (the view reads request.FILES itself)."""
    body = {"type": "object", "properties": dict(fields), "required": required}
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": body}}}}


FILE = ("file", {"type": "string", "format": "binary"})


def _form_invalid(form: Form) -> NinjaValidationError:
    errors = [
        {"type": "value_error", "loc": ["body", "payload", name if name != "__all__" else "non_field"], "msg": str(m)}
        for name, messages in form.errors.items()
        for m in messages
    ]
    return NinjaValidationError(errors)


def _fresh(request: HttpRequest, agent_id: int, dataset: Dataset) -> Dataset:
    found = selectors.dataset_get(agent=_agent(request, agent_id), dataset_id=dataset.pk)
    if found is None:
        raise Http404("No such dataset")
    return found


# ---- new datasets: generated, uploaded --------------------------------------------------------------


@router.post(
    DATASETS + "/generate",
    response={200: DatasetOut, 202: DatasetOut, 404: NotFoundOut, 409: NotFoundOut, 422: ValidationErrorOut},
    url_name="datasets_generate",
    summary="Generate a dataset with AI from the agent's configuration (a worker job)",
)
def dataset_generate(
    request: HttpRequest, agent_id: int, payload: DatasetGenerateIn, idempotency_key: str = IDEMPOTENCY
) -> Status[Any]:
    """202: the dataset is extracting while the model writes its cases. The same
    Idempotency-Key answers 200 with the dataset the first request made; 409 without a model."""
    agent = _agent(request, agent_id)
    if not llm.is_configured("llm"):
        return refusal(409, NO_MODEL_MESSAGE)

    def create() -> Dataset:
        form = GenerateForm(payload.model_dump())
        if not form.is_valid():
            raise _form_invalid(form)
        return dataset_generate_create(agent=agent, user=_user(request), **form.cleaned_data)

    try:
        dataset, replayed = idempotent_create(
            user=_user(request),
            operation=f"datasets_generate:{agent_id}",
            key=idempotency_key,
            body=payload.model_dump(),
            load=loader(Dataset),
            create=create,
        )
    except ValidationError as exc:
        raise _invalid(exc) from None
    return Status(200 if replayed else 202, _fresh(request, agent_id, dataset))


@router.post(
    DATASETS + "/upload",
    response={200: DatasetOut, 202: DatasetOut, 404: NotFoundOut, 422: ValidationErrorOut},
    url_name="datasets_upload",
    summary="Make a dataset from a document or spreadsheet (extracted by a worker)",
    openapi_extra=_multipart(
        FILE,
        ("name", {"type": "string", "maxLength": 120}),
        ("agent_reads_source", {"type": "boolean", "description": "Attach the file to every case, for the agent"}),
        required=["file", "name"],
    ),
)
def dataset_upload(request: HttpRequest, agent_id: int, idempotency_key: str = IDEMPOTENCY) -> Status[Any]:
    """202: the dataset is extracting; a spreadsheet then waits in review for its column
    mapping (POST .../mapping). The same Idempotency-Key answers 200 with the first dataset."""
    agent = _agent(request, agent_id)
    guard = install_upload_guard(request)

    def create() -> Dataset:
        form = DatasetUploadForm(request.POST, request.FILES, too_big=guard.too_big)
        if not form.is_valid():
            raise _form_invalid(form)
        return dataset_upload_create(
            agent=agent,
            user=_user(request),
            name=form.cleaned_data["name"],
            upload=form.cleaned_data["file"],
            validated=form.validated,
            agent_reads_source=form.cleaned_data["agent_reads_source"],
        )

    try:
        dataset, replayed = idempotent_create(
            user=_user(request),
            operation=f"datasets_upload:{agent_id}",
            key=idempotency_key,
            body=upload_body(request),
            load=loader(Dataset),
            create=create,
        )
    except ValidationError as exc:
        raise _invalid(exc) from None
    return Status(200 if replayed else 202, _fresh(request, agent_id, dataset))


@router.post(
    DATASET + "/mapping/cancel",
    response={200: MessageOut, 404: NotFoundOut, 409: NotFoundOut},
    url_name="datasets_mapping_cancel",
    summary="Give up an upload waiting for its column mapping: the dataset and its file are deleted",
)
def dataset_mapping_cancel(request: HttpRequest, agent_id: int, dataset_id: int) -> Status[Any]:
    """409 when the dataset is not waiting for a mapping (as POST .../mapping)."""
    dataset = _dataset(request, agent_id, dataset_id)
    try:
        mapping.dataset_upload_cancel(dataset=dataset)
    except ValidationError as exc:
        return refusal(409, exc)
    return Status(200, {"message": f"Cancelled the upload of “{dataset.source_name}”. Nothing was created."})


@router.post(
    DATASET + "/warnings/dismiss",
    response={200: DatasetOut, 404: NotFoundOut},
    url_name="datasets_warnings_dismiss",
    summary="Mark the import warnings as read (each case keeps its own)",
)
def dataset_warnings_dismiss(request: HttpRequest, agent_id: int, dataset_id: int) -> Dataset:
    dataset = _dataset(request, agent_id, dataset_id)
    mapping.dataset_warnings_dismiss(dataset=dataset)
    return _fresh(request, agent_id, dataset)


# ---- import and export ------------------------------------------------------------------------------


def _import_operation(kind: str) -> None:
    """POST .../import/<kind>: the dataset page's Import dialog (all rows or none)."""

    def dataset_import(request: HttpRequest, agent_id: int, dataset_id: int) -> Status[Any]:
        dataset = _dataset(request, agent_id, dataset_id)
        guard = install_upload_guard(request)
        form = ImportForm(request.POST, request.FILES, kind=kind, too_big=guard.too_big)
        if not form.is_valid():
            raise _form_invalid(form)
        importer = services.dataset_import_csv if kind == "csv" else services.dataset_import_json
        try:
            result = importer(dataset=dataset, file=form.cleaned_data["file"])
        except ValidationError as exc:
            raise _invalid(exc) from None
        return Status(200, {"message": result.message, "level": result.level})

    router.add_api_operation(
        DATASET + f"/import/{kind}",
        ["POST"],
        dataset_import,
        response={200: MessageOut, 404: NotFoundOut, 422: ValidationErrorOut},
        operation_id=f"dataset_import_{kind}",
        url_name=f"datasets_import_{kind}",
        summary=f"Import test cases from a {'CSV' if kind == 'csv' else 'EvalSet JSON'} file into the dataset",
        openapi_extra=_multipart(FILE, required=["file"]),
    )


def _export_operation(kind: str, content_type: str) -> None:
    """GET .../export/<kind>: the file the dataset page's Export menu downloads."""

    def dataset_export(request: HttpRequest, agent_id: int, dataset_id: int) -> HttpResponse:
        dataset = _dataset(request, agent_id, dataset_id)
        if kind == "csv":
            content = exporters.dataset_export_csv(dataset=dataset)
        else:
            content = json.dumps(services.dataset_export_json(dataset=dataset), ensure_ascii=False, indent=2)
        response = HttpResponse(content, content_type=content_type)
        filename = exporters.export_filename(dataset, kind)
        response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
        return response

    router.add_api_operation(
        DATASET + f"/export/{kind}",
        ["GET"],
        dataset_export,
        response={404: NotFoundOut},
        operation_id=f"dataset_export_{kind}",
        url_name=f"datasets_export_{kind}",
        summary=f"Download the dataset as {kind.upper()}",
        openapi_extra={"responses": {"200": {"description": "The file", "content": {content_type: {}}}}},
    )


for _kind in ("csv", "json"):
    _import_operation(_kind)
_export_operation("csv", "text/csv; charset=utf-8")
_export_operation("json", "application/json")


# ---- a case: its place, its documents -----------------------------------------------------------------


@router.post(
    ITEM + "/move",
    response={200: MovedOut, 404: NotFoundOut},
    url_name="datasets_case_move",
    summary="Move a test case one place up or down, or to the top or bottom of the dataset",
)
def item_move(request: HttpRequest, agent_id: int, dataset_id: int, item_id: int, payload: MoveIn) -> Status[Any]:
    case = _item(request, agent_id, dataset_id, item_id)
    current = selectors.case_index(case=case)
    targets = {"up": current - 1, "down": current + 1, "top": 0, "bottom": case.dataset.cases.count()}
    index = services.case_move(case=case, to_index=targets[payload.direction])
    return Status(200, {"id": case.pk, "number": index + 1})


@router.post(
    ITEM + "/documents",
    response={200: DocumentOut, 201: DocumentOut, 404: NotFoundOut, 422: ValidationErrorOut},
    url_name="datasets_case_document_attach",
    summary="Attach a document to a test case (it is sent to the agent with the question)",
    openapi_extra=_multipart(FILE, required=["file"]),
)
def item_document_attach(
    request: HttpRequest, agent_id: int, dataset_id: int, item_id: int, idempotency_key: str = IDEMPOTENCY
) -> Status[Any]:
    """201; the same Idempotency-Key answers 200 with the document the first request attached."""
    case = _item(request, agent_id, dataset_id, item_id)
    guard = install_upload_guard(request)

    def attach() -> Document:
        form = DocumentUploadForm(request.POST, request.FILES, too_big=guard.too_big)
        if not form.is_valid():
            raise _form_invalid(form)
        return documents.case_document_attach(case=case, upload=form.cleaned_data["file"], validated=form.validated)

    try:
        document, replayed = idempotent_create(
            user=_user(request),
            operation=f"datasets_case_document_attach:{agent_id}:{dataset_id}:{item_id}",
            key=idempotency_key,
            body=upload_body(request),
            load=loader(Document),
            create=attach,
        )
    except ValidationError as exc:
        raise _invalid(exc) from None
    return Status(200 if replayed else 201, document)


@router.delete(
    ITEM + "/documents/{document_id}",
    response={204: None, 404: NotFoundOut},
    url_name="datasets_case_document_detach",
    summary="Take a document off a test case",
)
def item_document_detach(
    request: HttpRequest, agent_id: int, dataset_id: int, item_id: int, document_id: int
) -> Status[None]:
    """Idempotent: a document of the dataset that the case does not have is a 204 too."""
    case = _item(request, agent_id, dataset_id, item_id)
    document = Document.objects.filter(pk=document_id, dataset_id=case.dataset_id).first()
    if document is None:
        raise Http404("No such document in this dataset")
    if case.documents.filter(pk=document.pk).exists():
        documents.case_document_detach(case=case, document=document)
    return Status(204, None)
