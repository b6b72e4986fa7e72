"""Documents: storing uploads, attaching them to cases, serving and previewing them.

Files live under MEDIA_ROOT with random names (datasets.models._document_path) and
are never served from a public URL. Downloads go through a view that checks the
team, always as an attachment with nosniff (check 8 in docs/architecture.md). The one
exception is the PDF preview: a PDF that starts with %PDF- is served inline
to the browser's own PDF viewer with `Content-Security-Policy: sandbox`, which
gives the response an opaque origin of its own, so even a file crafted to be
read as HTML could not run script or reach the app's cookies and pages.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.http import FileResponse

from accounts.models import Team
from datasets.extraction import sandbox
from datasets.extraction.errors import ExtractionFailed, FileRejected
from datasets.extraction.validation import ValidatedFile, validate_file
from datasets.models import Dataset, Document, TestCase
from evalsite.storage import stored_files_delete

CONTENT_TYPES = {
    "pdf": "application/pdf",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "xls": "application/vnd.ms-excel",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "csv": "text/csv; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
    "json": "application/json",
}
MAX_DOCUMENTS_PER_CASE = 10
PREVIEW_CACHE_SECONDS = 3600
PREVIEW_TIMEOUT_SECONDS = 20.0


def upload_validate(upload: UploadedFile) -> ValidatedFile:
    """The upload's real type, size and hash; raises ValidationError with a readable message."""
    try:
        return validate_file(upload.name or "", upload, upload.size or 0, max_bytes=settings.UPLOAD_MAX_BYTES)
    except FileRejected as exc:
        raise ValidationError(exc.reason, code="invalid_file") from exc


def document_store(*, team: Team, dataset: Dataset | None, upload: UploadedFile, validated: ValidatedFile) -> Document:
    """Save the file under a server-generated name and create its Document row.

    Call inside the caller's transaction; if that transaction rolls back the caller
    must delete the file (see document_file_delete), since storage is not transactional.
    """
    document = Document(
        team=team,
        dataset=dataset,
        original_name=validated.original_name,
        file_type=validated.file_type,
        size=validated.size,
        sha256=validated.sha256,
    )
    upload.seek(0)
    document.file.save(f"upload.{validated.file_type}", upload, save=False)
    document.save()
    return document


def document_file_delete(document: Document) -> None:
    """Remove a stored file whose row will not be kept (the caller's transaction failed)."""
    stored_files_delete([document.file.name])


def case_document_attach(*, case: TestCase, upload: UploadedFile, validated: ValidatedFile | None = None) -> Document:
    """Validate an upload and attach it to a (manual) case, the same checks as a dataset upload."""
    validated = validated or upload_validate(upload)
    if case.documents.count() >= MAX_DOCUMENTS_PER_CASE:
        raise ValidationError(f"A test case can have at most {MAX_DOCUMENTS_PER_CASE} documents.")
    dataset = case.dataset
    document: Document | None = None
    try:
        with transaction.atomic():
            document = document_store(team=dataset.agent.team, dataset=dataset, upload=upload, validated=validated)
            case.documents.add(document)
    except Exception:
        if document is not None:
            document_file_delete(document)
        raise
    return document


@transaction.atomic
def case_document_detach(*, case: TestCase, document: Document) -> None:
    """Take a document off a case; the file goes too once no case uses it and it is not the dataset's source."""
    case.documents.remove(document)
    if not is_source_document(document) and not document.cases.exists():
        file_name = document.file.name
        document.delete()
        transaction.on_commit(partial(stored_files_delete, [file_name]))


def is_source_document(document: Document) -> bool:
    """The file a dataset was extracted from: kept with the dataset for as long as it exists."""
    dataset = document.dataset
    if dataset is None or dataset.source != Dataset.Source.UPLOAD:
        return False
    return dataset.documents.order_by("pk").values_list("pk", flat=True).first() == document.pk


# ---- serving ---------------------------------------------------------------------


def download_response(document: Document) -> FileResponse:
    """The original file as a download: attachment, nosniff, sandboxed, never cached by proxies."""
    response = FileResponse(
        document.file.open("rb"),
        as_attachment=True,
        filename=document.original_name,
        content_type=CONTENT_TYPES.get(document.file_type, "application/octet-stream"),
    )
    _harden(response)
    return response


def pdf_inline_response(document: Document) -> FileResponse | None:
    """A PDF for the browser's own viewer (an <iframe> in the preview dialog); None if it is not a real PDF."""
    if document.file_type != Document.FileType.PDF:
        return None
    handle = document.file.open("rb")
    head = handle.read(1024)
    handle.seek(0)
    if b"%PDF-" not in head:
        handle.close()
        return None
    response = FileResponse(
        handle, as_attachment=False, filename=document.original_name, content_type="application/pdf"
    )
    _harden(response)
    return response


def _harden(response: FileResponse) -> None:
    response["X-Content-Type-Options"] = "nosniff"
    # An opaque origin with no scripts: nothing in the file can act as the app.
    response["Content-Security-Policy"] = "sandbox; frame-ancestors 'self'"
    response["Cache-Control"] = "private, no-store"
    response["Cross-Origin-Resource-Policy"] = "same-origin"


# ---- preview ---------------------------------------------------------------------


def preview_blocks(document: Document) -> tuple[list[dict[str, Any]], str]:
    """(blocks, problem): the document as headings, paragraphs and capped tables, parsed in the sandbox.

    PDFs are shown by the browser's viewer instead. Cached by content hash, so
    reopening a preview does not parse the file again.
    """
    key = f"document-preview:v1:{document.file_type}:{document.sha256 or document.pk}"
    cached = cache.get(key)
    if cached is not None:
        return cached, ""
    try:
        answer = sandbox.run(
            {"mode": "preview", "path": document.file.path, "file_type": document.file_type},
            timeout=PREVIEW_TIMEOUT_SECONDS,
            memory_mb=settings.EVALSITE_PARSE_MEMORY_MB,
        )
    except ExtractionFailed as exc:
        return [], exc.reason
    except FileNotFoundError:
        return [], "The file is missing from storage."
    cache.set(key, answer["blocks"], PREVIEW_CACHE_SECONDS)
    return answer["blocks"], ""
