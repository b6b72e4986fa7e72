"""Upload a document, then read its test cases in a background job.

dataset_upload_create  validated upload -> Dataset (Extracting) + Document, job queued on commit
dataset_extract        the job: claim, read the file in the sandbox (once: what it read is kept on
                       Document.reading until the mapping is confirmed), maybe ask the model,
                       save all or nothing

Claiming, failing and re-sending the job are datasets.jobs, shared with AI generation.
"""

from __future__ import annotations

import bisect
import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from agents.models import Agent
from datasets.documents import document_file_delete, document_store, upload_validate
from datasets.extraction import reading, sandbox
from datasets.extraction.dedupe import NearDuplicates
from datasets.extraction.derive import questions_derive
from datasets.extraction.errors import ExtractionFailed, FileRejected
from datasets.extraction.llm_cases import extract_with_model
from datasets.extraction.prose import squash
from datasets.extraction.validation import ValidatedFile, validate_file
from datasets.jobs import EXTRACT, job_claim, job_enqueue, job_fail
from datasets.models import Dataset, Document
from datasets.services import case_bulk_create, dataset_create
from evalsite import llm

logger = logging.getLogger(__name__)

SPREADSHEETS = ("xlsx", "xls", "csv")
# Documents whose prose only a model can turn into cases (when they hold no table or labelled block).
PROSE_TYPES = ("pdf", "docx", "md")
# The code of the upload error that a model would fix: the page links to how to connect one.
NEEDS_MODEL = "needs_model"
# Words of prose left beside a document's tables and labelled cases before the model is
# asked for the rules it states (a test plan's title block and intro stay below it).
MIN_PROSE_WORDS_FOR_MODEL = 60


@dataclass
class Extraction:
    cases: list[dict[str, Any]]
    notice: str
    text: str
    warnings: list[dict[str, str]] = field(default_factory=list)
    # Cases the model wrote and that were dropped: warnings naming the model, never the file.
    model_warnings: list[dict[str, str]] = field(default_factory=list)
    # Set when the user must confirm the mapping (or the case limit) before cases are created.
    review: dict[str, Any] | None = None


def dataset_upload_create(
    *,
    agent: Agent,
    user: User | None,
    name: str,
    upload: UploadedFile,
    validated: ValidatedFile | None = None,
    agent_reads_source: bool = False,
) -> Dataset:
    """A dataset in Extracting with the uploaded file as its Document; the extraction job starts on commit.

    The file is the cases' source; with agent_reads_source it is also attached to them, so
    the agent under test receives it (the team chose that in the wizard, knowing it holds
    the expected answers).
    """
    validated = validated or upload_validate(upload)
    read = None
    if validated.file_type in PROSE_TYPES and not llm.is_configured("llm"):
        read = _refuse_prose_without_model(upload, validated)
    with upload_dataset_stored(
        agent=agent, user=user, name=name, upload=upload, validated=validated, agent_reads_source=agent_reads_source
    ) as (dataset, document):
        if read is not None:
            # The job starts from what this check read: the file is not read a second time.
            Document.objects.filter(pk=document.pk).update(reading=read)
        job_enqueue(EXTRACT, dataset.pk)
    return dataset


def _refuse_prose_without_model(upload: UploadedFile, validated: ValidatedFile) -> dict[str, Any]:
    """A document only a model could read, with no model connected: refused before any dataset
    exists (it would only end Failed). Reads the file in the sandbox, as the job would, and
    returns the reading for the job."""
    with tempfile.NamedTemporaryFile(suffix=f".{validated.file_type}") as handle:
        for chunk in upload.chunks():
            handle.write(chunk)
        handle.flush()
        upload.seek(0)
        try:
            read = read_path(handle.name, validated.file_type)
        except ExtractionFailed as exc:
            return reading.failed(exc.reason)  # a damaged file: the job says why, as for any other upload
    answer = mapped(read, validated.file_type, chosen=None)
    if answer["cases"]:
        return read
    if answer.get("header_only"):
        headers = answer["header_only"][0][:200]
        raise ValidationError(
            {"file": f"The file has its header row ({headers}) but no rows under it: add a row per test case."}
        )
    raise ValidationError(
        {
            "file": ValidationError(
                f"“{validated.original_name}” has no table with a question column and no labelled test cases "
                "(lines such as “Question:” and “Expected answer:”), so only a model could read test cases from "
                "its text, and no model is connected. Connect a model, or upload a test plan with a table or "
                "labelled questions.",
                code=NEEDS_MODEL,
            )
        }
    )


@contextmanager
def upload_dataset_stored(
    *,
    agent: Agent,
    user: User | None,
    name: str,
    upload: UploadedFile,
    validated: ValidatedFile,
    agent_reads_source: bool = False,
) -> Iterator[tuple[Dataset, Document]]:
    """A new upload dataset in Extracting with the file stored as its Document, in one
    transaction that the caller's block runs inside (the wizard's upload, manage.py dataset_import)."""
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
                agent_reads_source=agent_reads_source,
            )
            document = document_store(team=agent.team, dataset=dataset, upload=upload, validated=validated)
            yield dataset, document
    except Exception:
        # Storage is not transactional: a rolled-back dataset must not leave its file behind.
        if document is not None:
            document_file_delete(document)
        raise


def dataset_extract(*, dataset_id: int) -> None:
    """Read the dataset's cases from its document. Safe to run twice: only one run saves."""
    dataset = job_claim(EXTRACT, dataset_id)
    if dataset is None:
        return
    document = dataset.documents.order_by("pk").first()
    if document is None:
        job_fail(dataset_id=dataset_id, reason="The uploaded file is missing. Upload it again.")
        return
    try:
        extraction, read = _extract(dataset, document)
    except ExtractionFailed as exc:
        reason = exc.reason
    except SoftTimeLimitExceeded:
        reason = "Reading the document took too long. Split it into smaller files and upload them one by one."
    else:
        _save(dataset_id=dataset_id, document=document, extraction=extraction, read=read)
        return
    Document.objects.filter(pk=document.pk).update(reading=None)  # a Failed upload is never mapped
    job_fail(dataset_id=dataset_id, reason=reason)


def _extract(dataset: Dataset, document: Document) -> tuple[Extraction, dict[str, Any]]:
    """(what the document's reading gives, the reading). The file is read in the sandbox only
    when no reading is kept: after the mapping step, the user's choice applies to the first one."""
    limit = settings.EVALSITE_MAX_CASES_PER_DOCUMENT
    read = document.reading
    if read is None:
        _recheck(document)
        read = read_path(document.file.path, document.file_type)
    state = dataset.mapping or {}
    answer = mapped(read, document.file_type, chosen=state.get("chosen"))
    extraction = extraction_from_answer(
        answer, state=state, limit=limit, file_type=document.file_type, trace=dataset.pk
    )
    return extraction, read


def read_path(path: str, file_type: str) -> dict[str, Any]:
    """What the file holds (reading.py), read in the sandbox: the one place an upload's bytes are parsed."""
    answer = sandbox.run(
        {"mode": "read", "path": path, "file_type": file_type},
        timeout=settings.EVALSITE_PARSE_TIMEOUT,
        memory_mb=settings.EVALSITE_PARSE_MEMORY_MB,
    )
    return answer["reading"]


def mapped(read: dict[str, Any], file_type: str, *, chosen: dict[str, Any] | None) -> dict[str, Any]:
    """The parse's answer: what was read, under the user's mapping (the suggested one without it).
    In-process and without the file: the child's extract mode runs the same reading.answer."""
    return reading.answer(
        reading.load(read), file_type, mapping=chosen, max_cases=settings.EVALSITE_MAX_CASES_PER_DOCUMENT
    )


def extraction_from_answer(
    answer: dict[str, Any], *, state: dict[str, Any], limit: int, file_type: str, trace: Any = None
) -> Extraction:
    """What the parse means for the dataset: cases to create, or a mapping step for the user first.

    Tables always go through the mapping step; other files only when they hold more
    cases than the limit. After the user confirmed (state["chosen"]), cases are created.
    """
    cases, total = answer["cases"], answer["total"]
    pages = [(page, text) for page, text in answer["pages"] if text.strip()]
    if cases:
        confirmed = "chosen" in state
        over = total > limit
        from_table = "table" in answer["method"].split("+")
        if not confirmed and (from_table or over) or (confirmed and over and not state["keep_first"]):
            review = {
                "method": answer["method"],
                "total": total,
                "limit": limit,
                "tables": answer["tables"],
                "warnings": answer["warnings"],
                "problem": (
                    f"With this mapping the file has {total} test cases, more than the {limit} that can be kept."
                    if confirmed
                    else ""
                ),
            }
            return Extraction(cases=[], notice="", text=answer["text"], review=review)
        notice = ""
        model_warnings: list[dict[str, str]] = []
        if over:
            notice = (
                f"The document has {total} test cases; the limit is {limit} per document, "
                f"so the first {limit} were kept."
            )
        elif _has_rules_left(file_type, pages):
            cases, notice, model_warnings = _with_prose_cases(trace, cases, pages, limit, file_type, answer["text"])
        if state.get("derive_questions") and llm.is_configured("llm"):
            questions_derive(cases, trace=trace)
        return Extraction(
            cases=cases, notice=notice, text=answer["text"], warnings=answer["warnings"], model_warnings=model_warnings
        )
    if not pages:
        raise ExtractionFailed(_nothing_found(file_type, answer, has_text=False))
    if (file_type in SPREADSHEETS or answer.get("header_only")) and not llm.is_configured("llm"):
        # A sheet without a question column: say that, not "a model is needed".
        raise ExtractionFailed(_nothing_found(file_type, answer, has_text=True))
    found = extract_with_model(pages, max_cases=limit, trace={"dataset": trace})
    if not found.cases:
        raise ExtractionFailed(_nothing_found(file_type, answer, has_text=True))
    if file_type == "md":
        _locate_lines(found.cases, answer["text"])
    notice = ""
    if found.more_than_limit:
        notice = f"The document describes more than {limit} test cases; the first {limit} were kept."
    return Extraction(
        cases=found.cases,
        notice=notice,
        text=answer["text"],
        warnings=answer["warnings"],
        model_warnings=found.warnings(),
    )


def _has_rules_left(file_type: str, pages: list[tuple[int | None, str]]) -> bool:
    """Prose beside the tables and labelled blocks that is long enough to hold rules, and a
    model to read them: a title and a date line are not worth a model call."""
    if file_type in SPREADSHEETS or not llm.is_configured("llm"):
        return False
    return sum(len(text.split()) for _, text in pages) >= MIN_PROSE_WORDS_FOR_MODEL


def _with_prose_cases(
    trace: Any,
    cases: list[dict[str, Any]],
    pages: list[tuple[int | None, str]],
    limit: int,
    document_type: str,
    text: str,
) -> tuple[list[dict[str, Any]], str, list[dict[str, str]]]:
    """(cases, notice, model warnings): the cases read without a model, then those the model
    finds in the prose around them. A model failure keeps the first ones and says so."""
    try:
        found = extract_with_model(pages, max_cases=limit, trace={"dataset": trace})
    except ExtractionFailed as exc:
        notice = (
            f"The {len(cases)} test cases in the document's tables and labelled blocks were kept, but the "
            f"rules in its other text were not read: {exc.reason}"
        )
        return cases, notice, []
    seen = NearDuplicates()
    for case in cases:
        seen.is_new(case["question"])
    extra = [case for case in found.cases if seen.is_new(case["question"])]
    if document_type == "md":
        _locate_lines(extra, text)
    total = len(cases) + len(extra)
    if total > limit:
        notice = (
            f"The document has {total} test cases (tables, labelled blocks and rules in its text); the limit is "
            f"{limit} per document, so the first {limit} were kept."
        )
        return (cases + extra)[:limit], notice, found.warnings()
    return cases + extra, "", found.warnings()


def _locate_lines(cases: list[dict[str, Any]], text: str) -> None:
    """A Markdown case the model read gets the line its quoted span starts on."""
    starts: list[int] = []
    joined = ""
    for line in text.splitlines():
        starts.append(len(joined))
        joined += squash(line) + " "
    for case in cases:
        needle = squash(case.get("span", ""))[:200]
        if case.get("location") or len(needle) < 12:
            continue
        found = joined.find(needle)
        if found >= 0:
            case["location"] = f"line {bisect.bisect_right(starts, found)}"


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
    if answer.get("header_only"):
        return (
            f"No test cases found: the file has its header row ({answer['header_only'][0][:200]}) but no rows "
            "under it. Add a row per test case and upload the file again."
        )
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


def _save(*, dataset_id: int, document: Document, extraction: Extraction, read: dict[str, Any]) -> None:
    """All cases or none, and only while the dataset is still Extracting (not deleted, not settled).
    The reading is kept while the user confirms the mapping, and dropped once the cases exist."""
    with transaction.atomic():
        dataset = Dataset.objects.select_for_update().filter(pk=dataset_id, status=Dataset.Status.EXTRACTING).first()
        if dataset is None:
            return  # deleted while we read, or another delivery of this job settled it
        kept = read if extraction.review is not None else None
        Document.objects.filter(pk=document.pk).update(text=extraction.text, reading=kept)
        if extraction.review is not None:
            # Nothing is created until the user confirms the mapping (mapping.dataset_mapping_confirm).
            dataset.status, dataset.mapping = Dataset.Status.REVIEW, {**dataset.mapping, **extraction.review}
            dataset.mapping.pop("chosen", None)
            dataset.save(update_fields=["status", "mapping", "updated_at"])
            return
        rows = case_rows(extraction.cases, document, attach=dataset.agent_reads_source)
        try:
            case_bulk_create(dataset=dataset, cases=rows)
        except ValidationError as exc:
            logger.warning("extracted cases refused for dataset %s: %s", dataset_id, exc.messages[:3])
            dataset.status, dataset.failure_reason = Dataset.Status.FAILED, _refused_reason(exc)
            dataset.save(update_fields=["status", "failure_reason", "updated_at"])
            return
        dataset.status, dataset.notice, dataset.failure_reason = Dataset.Status.READY, extraction.notice, ""
        dataset.warnings = [
            *file_warnings(extraction.warnings, document.original_name),
            *extraction.model_warnings,
        ]
        dataset.save(update_fields=["status", "notice", "failure_reason", "warnings", "updated_at"])


def file_warnings(warnings: list[dict[str, str]], file_name: str) -> list[dict[str, str]]:
    """The parse's warnings, each naming the file as well as the sheet/row/page."""
    return [
        {"where": f"{file_name}, {item['where']}" if item.get("where") else file_name, "message": item["message"]}
        for item in warnings
    ]


def case_rows(
    cases: list[dict[str, Any]], document: Document | None, *, file_name: str = "", attach: bool = False
) -> list[dict[str, Any]]:
    """Parsed cases as case fields with the upload (when stored) as their source; attached too
    only when the team chose to let the agent read it (it then reads the expected answers as well)."""
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
                "source_file": document.original_name if document else file_name,
                "source_location": case.get("location", "")[:100],
                "source_span": case.get("span", ""),
                "source_document": document,
                "documents": [document] if attach and document is not None else [],
                "metadata": case.get("metadata", {}),
                "import_warnings": case.get("warnings", []),
                "extra": _derived(case),
            }
        )
    return rows


def _derived(case: dict[str, Any]) -> dict[str, str]:
    """A question read from another column's steps: the column, and "model" when a model wrote it."""
    keys = ("question_from", "question_written_by")
    return {key: case[key] for key in keys if case.get(key)}


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
