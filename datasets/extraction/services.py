"""Upload a document, then read its test cases in a background job.

dataset_upload_create  validated upload -> Dataset (Extracting) + Document, job queued on commit
dataset_extract        the job: claim, parse in the sandbox, maybe ask the model, save all or nothing
dataset_extract_fail   settle a dataset as Failed with a reason a QA person can act on
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from agents.models import Agent
from datasets.documents import document_file_delete, document_store, upload_validate
from datasets.extraction import sandbox
from datasets.extraction.errors import ExtractionFailed, FileRejected
from datasets.extraction.llm_cases import extract_with_model
from datasets.extraction.validation import ValidatedFile, validate_file
from datasets.models import Dataset, Document
from datasets.services import case_bulk_create, dataset_create
from evalsite import llm

logger = logging.getLogger(__name__)

SPREADSHEETS = ("xlsx", "xls", "csv")
UNEXPECTED_REASON = (
    "Something went wrong on the server while reading the file. Try uploading it again; if it keeps "
    "failing, save it in another format (XLSX, CSV or PDF)."
)


@dataclass
class Extraction:
    cases: list[dict[str, Any]]
    notice: str
    text: str


def dataset_upload_create(
    *,
    agent: Agent,
    user: User | None,
    name: str,
    upload: UploadedFile,
    validated: ValidatedFile | None = None,
) -> Dataset:
    """A dataset in Extracting with the uploaded file as its Document; the extraction job starts on commit."""
    from datasets.tasks import dataset_extract as dataset_extract_task

    validated = validated or upload_validate(upload)
    document: Document | None = None
    try:
        with transaction.atomic():
            dataset = dataset_create(
                agent=agent,
                user=user,
                name=name,
                source=Dataset.Source.UPLOAD,
                status=Dataset.Status.EXTRACTING,
                source_name=validated.original_name,
            )
            document = document_store(team=agent.team, dataset=dataset, upload=upload, validated=validated)
            transaction.on_commit(partial(dataset_extract_task.delay, dataset_id=dataset.pk))
    except Exception:
        # Storage is not transactional: a rolled-back dataset must not leave its file behind.
        if document is not None:
            document_file_delete(document)
        raise
    return dataset


def dataset_extract(*, dataset_id: int) -> None:
    """Read the dataset's cases from its document. Safe to run twice: only one run saves."""
    dataset = _claim(dataset_id)
    if dataset is None:
        return
    document = dataset.documents.order_by("pk").first()
    if document is None:
        dataset_extract_fail(dataset_id=dataset_id, reason="The uploaded file is missing. Upload it again.")
        return
    try:
        extraction = _extract(dataset, document)
    except ExtractionFailed as exc:
        dataset_extract_fail(dataset_id=dataset_id, reason=exc.reason)
        return
    except SoftTimeLimitExceeded:
        dataset_extract_fail(
            dataset_id=dataset_id,
            reason="Reading the document took too long. Split it into smaller files and upload them one by one.",
        )
        return
    _save(dataset_id=dataset_id, document=document, extraction=extraction)


def dataset_extract_fail(*, dataset_id: int, reason: str) -> bool:
    """Extracting -> Failed with `reason`; False when the dataset had already settled or is gone."""
    return bool(
        Dataset.objects.filter(pk=dataset_id, status=Dataset.Status.EXTRACTING).update(
            status=Dataset.Status.FAILED, failure_reason=reason[:2000], notice="", updated_at=timezone.now()
        )
    )


def dataset_extract_requeue_stale() -> list[int]:
    """Send the job again for upload and generation datasets stuck in Extracting; returns their ids.

    Late acks survive a killed worker, but not a flushed or restarted Redis: the message
    is gone and the dataset would say Extracting forever. Never-started jobs older than
    EVALSITE_STALE_QUEUE_SECONDS, and started ones past the hard task time limit, are sent
    again. A duplicate is harmless: the claim counts it and only one delivery saves.
    """
    from datasets.tasks import dataset_extract as dataset_extract_task
    from datasets.tasks import dataset_generate as dataset_generate_task

    # Keyed by the plain strings values_list gives back (a Source is equal to its value).
    tasks: dict[str, Any] = {
        Dataset.Source.UPLOAD: dataset_extract_task,
        Dataset.Source.GENERATED: dataset_generate_task,
    }
    now = timezone.now()
    queued_before = now - timedelta(seconds=settings.EVALSITE_STALE_QUEUE_SECONDS)
    started_before = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    stale = Dataset.objects.filter(status=Dataset.Status.EXTRACTING, source__in=list(tasks)).filter(
        Q(job_started_at__isnull=True, created_at__lt=queued_before) | Q(job_started_at__lt=started_before)
    )
    rows = list(stale.values_list("pk", "source"))
    for dataset_id, source in rows:
        tasks[source].delay(dataset_id=dataset_id)
    return [dataset_id for dataset_id, _ in rows]


def _claim(dataset_id: int) -> Dataset | None:
    """Count this attempt in the database; None when there is nothing (more) to do.

    Late acks redeliver a task whose worker died, with no retry count of their own, so
    a file that kills the worker every time would loop forever (check 20 in docs/architecture.md).
    """
    limit = settings.EVALSITE_EXTRACT_MAX_ATTEMPTS
    claimed = Dataset.objects.filter(pk=dataset_id, status=Dataset.Status.EXTRACTING, job_attempts__lt=limit).update(
        job_attempts=F("job_attempts") + 1, job_started_at=timezone.now()
    )
    if claimed:
        return Dataset.objects.select_related("agent").get(pk=dataset_id)
    dataset_extract_fail(
        dataset_id=dataset_id,
        reason=(
            f"Reading the file stopped the worker {limit} times, so Evalsite gave up. The file may be too large "
            "or too complex: split it, or save it in another format, and upload it again."
        ),
    )
    return None


def _extract(dataset: Dataset, document: Document) -> Extraction:
    limit = settings.EVALSITE_MAX_CASES_PER_DOCUMENT
    _recheck(document)
    answer = sandbox.run(
        {"mode": "extract", "path": document.file.path, "file_type": document.file_type, "max_cases": limit},
        timeout=settings.EVALSITE_PARSE_TIMEOUT,
        memory_mb=settings.EVALSITE_PARSE_MEMORY_MB,
    )
    cases, total = answer["cases"], answer["total"]
    if cases:
        notice = ""
        if total > limit:
            notice = (
                f"The document has {total} test cases; the limit is {limit} per document, "
                f"so the first {limit} were kept."
            )
        return Extraction(cases=cases, notice=notice, text=answer["text"])
    pages = [(page, text) for page, text in answer["pages"] if text.strip()]
    if not pages:
        raise ExtractionFailed(_nothing_found(document.file_type, answer, has_text=False))
    if document.file_type in SPREADSHEETS and not llm.is_configured("llm"):
        # A sheet without a question column: say that, not "a model is needed".
        raise ExtractionFailed(_nothing_found(document.file_type, answer, has_text=True))
    found = extract_with_model(pages, max_cases=limit, trace={"dataset": dataset.pk})
    if not found.cases:
        raise ExtractionFailed(_nothing_found(document.file_type, answer, has_text=True))
    notice = ""
    if found.more_than_limit:
        notice = f"The document describes more than {limit} test cases; the first {limit} were kept."
    return Extraction(cases=found.cases, notice=notice, text=answer["text"])


def _recheck(document: Document) -> None:
    """Validate the stored file again: it may not have come through the upload form (API, admin, older release)."""
    try:
        with document.file.open("rb") as handle:
            size = document.file.size
            checked = validate_file(f"document.{document.file_type}", handle, size, max_bytes=settings.UPLOAD_MAX_BYTES)
    except FileNotFoundError as exc:
        raise ExtractionFailed("The uploaded file is missing. Upload it again.") from exc
    except FileRejected as exc:
        raise ExtractionFailed(exc.reason) from exc
    if checked.file_type != document.file_type:
        raise ExtractionFailed("The file's content does not match its type. Upload it again.")


def _nothing_found(file_type: str, answer: dict[str, Any], *, has_text: bool) -> str:
    if not has_text:
        return "No test cases found: the document has no text."
    if file_type in SPREADSHEETS and answer["header_found"]:
        return "No test cases found: the question column is empty. Fill it in and upload the file again."
    if file_type in SPREADSHEETS:
        return (
            "No test cases found: the sheet has no question column (a header such as Question, Prompt, Input, "
            "Query or Scenario) and the text describes no scenarios. Add a header row and upload the file again."
        )
    return (
        "No test cases found: the document has no table with a question column, and its text describes no "
        "rules or scenarios to test. Upload a test plan, or a policy or specification with concrete rules."
    )


def _save(*, dataset_id: int, document: Document, extraction: Extraction) -> None:
    """All cases or none, and only while the dataset is still Extracting (not deleted, not settled)."""
    rows = _case_rows(extraction.cases, document)
    with transaction.atomic():
        dataset = Dataset.objects.select_for_update().filter(pk=dataset_id, status=Dataset.Status.EXTRACTING).first()
        if dataset is None:
            return  # deleted while we read, or another delivery of this job settled it
        try:
            case_bulk_create(dataset=dataset, cases=rows)
        except ValidationError as exc:
            logger.warning("extracted cases refused for dataset %s: %s", dataset_id, exc.messages[:3])
            dataset.status, dataset.failure_reason = Dataset.Status.FAILED, _refused_reason(exc)
            dataset.save(update_fields=["status", "failure_reason", "updated_at"])
            return
        Document.objects.filter(pk=document.pk).update(text=extraction.text)
        dataset.status, dataset.notice, dataset.failure_reason = Dataset.Status.READY, extraction.notice, ""
        dataset.save(update_fields=["status", "notice", "failure_reason", "updated_at"])


def _case_rows(cases: list[dict[str, Any]], document: Document) -> list[dict[str, Any]]:
    rows = []
    used_ids: set[str] = set()
    for case in cases:
        case_id = case.get("case_id", "")
        if case_id:
            case_id = _unique_id(case_id, used_ids)
        rows.append(
            {
                "question": case["question"],
                "expected_answer": case.get("expected_answer", ""),
                "case_id": case_id,
                "document_context": case.get("document_context", ""),
                "judge_guideline": case.get("judge_guideline", ""),
                "tags": case.get("tags", []),
                "tests_rule": case.get("tests_rule", ""),
                "source_file": document.original_name,
                "source_location": case.get("location", "")[:100],
                "source_span": case.get("span", ""),
                "documents": [document],
            }
        )
    return rows


def _unique_id(case_id: str, used: set[str]) -> str:
    # Sheets often number their cases 1..n each; the second "1" becomes "1-2".
    candidate, suffix = case_id[:100], 2
    while candidate in used:
        candidate = f"{case_id[:95]}-{suffix}"
        suffix += 1
    used.add(candidate)
    return candidate


def _refused_reason(exc: ValidationError) -> str:
    first = "; ".join(exc.messages[:3])
    return f"The document's cases could not be saved: {first}. Fix these rows and upload the file again."
