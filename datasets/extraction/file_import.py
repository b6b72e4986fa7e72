"""A file on disk to a dataset, through the same pipeline as an upload, without the wizard:
`manage.py dataset_import` (CI jobs that keep test plans in a repository).

validation -> sandboxed read -> the mapping (given as JSON, or the suggested one) ->
warnings -> the case limit -> cases. With dry_run nothing is saved. The mapping step the
wizard shows is answered by the arguments: a JSON mapping, and keep_first for a file
over the limit.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile

from agents.models import Agent
from datasets.extraction.errors import ExtractionFailed, FileRejected
from datasets.extraction.mapping import mapping_from_json, suggested_choice
from datasets.extraction.services import (
    case_rows,
    extraction_from_answer,
    file_warnings,
    mapped,
    read_path,
    upload_dataset_stored,
)
from datasets.extraction.validation import ValidatedFile, validate_file
from datasets.importers import parse_eval_set
from datasets.models import Dataset, Document
from datasets.services import case_bulk_create, dataset_create_from_file


class ImportRefused(Exception):
    """The file yields no case or is refused; `reason` says why (exit 1)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BadMapping(Exception):
    """The --mapping JSON does not fit the file (exit 2)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class FileImport:
    file_name: str
    tables: list[dict[str, Any]]
    chosen: dict[str, Any]
    cases: list[dict[str, Any]]
    warnings: list[dict[str, str]]
    notice: str
    total: int
    dataset: Dataset | None = None
    method: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def dataset_file_import(
    *,
    agent: Agent,
    user: User | None,
    path: Path,
    name: str = "",
    mapping: Any = None,
    keep_first: bool = False,
    dry_run: bool = False,
) -> FileImport:
    """Read `path` into a new dataset of `agent` (or only describe it, with dry_run).

    Raises ImportRefused (no case, a refused file, over the limit without keep_first),
    BadMapping (the mapping names sheets, columns or fields the file does not have), and
    ValidationError from dataset_create (a name already used, 100 datasets).
    """
    data = path.read_bytes()
    if path.suffix.lower() == ".json":
        if mapping is not None:
            raise BadMapping("An EvalSet JSON file has no columns, so --mapping does not apply to it.")
        return _eval_set_import(agent=agent, user=user, path=path, data=data, name=name, dry_run=dry_run)
    validated = _validate(path.name, data)
    limit = settings.EVALSITE_MAX_CASES_PER_DOCUMENT
    try:
        read = read_path(str(path), validated.file_type)  # once: a mapping applies to what was read
        answer = mapped(read, validated.file_type, chosen=None)
        tables = answer.get("tables") or []
        chosen = suggested_choice(tables)
        if mapping is not None:
            if not tables:
                raise BadMapping("The file holds no table, so a column mapping does not apply to it.")
            try:
                chosen = mapping_from_json(tables=tables, raw=mapping)
            except ValidationError as exc:
                raise BadMapping(" ".join(exc.messages)) from exc
            answer = mapped(read, validated.file_type, chosen=chosen)
        extraction = extraction_from_answer(
            answer, state={"chosen": chosen, "keep_first": keep_first}, limit=limit, file_type=validated.file_type
        )
    except ExtractionFailed as exc:
        raise ImportRefused(exc.reason) from exc
    if extraction.review is not None:
        raise ImportRefused(
            f"The file has {answer['total']} test cases; at most {limit} can be kept from one file. "
            f"Pass --keep-first to keep the first {limit}, or split the file."
        )
    rows = case_rows(extraction.cases, None, file_name=validated.original_name)
    result = FileImport(
        file_name=validated.original_name,
        tables=answer.get("tables") or [],
        chosen=chosen,
        cases=rows,
        warnings=[*file_warnings(extraction.warnings, validated.original_name), *extraction.model_warnings],
        notice=extraction.notice,
        total=answer["total"] if answer["cases"] else len(rows),
        method=answer["method"] or "model",
    )
    if not dry_run:
        result.dataset = _save(agent=agent, user=user, name=name or path.stem, data=data, validated=validated,
                               result=result, text=extraction.text)  # fmt: skip
    return result


def _eval_set_import(
    *, agent: Agent, user: User | None, path: Path, data: bytes, name: str, dry_run: bool
) -> FileImport:
    """An ADK/10xgraph EvalSet, imported as the UI's "New dataset or import" does."""
    try:
        parsed = parse_eval_set(data)
    except ValidationError as exc:
        raise ImportRefused(" ".join(exc.messages)) from exc
    result = FileImport(
        file_name=path.name,
        tables=[],
        chosen={},
        cases=[{**_EMPTY_ROW, **case} for case in parsed.cases],
        warnings=[{"where": path.name, "message": item} for item in parsed.skipped],
        notice="",
        total=len(parsed.cases),
        method="eval_set",
    )
    if not dry_run:
        upload = SimpleUploadedFile(path.name, data)
        result.dataset, _ = dataset_create_from_file(agent=agent, user=user, name=name, file=upload)
    return result


# What the command prints for a case the EvalSet does not say (it has no source file or place).
_EMPTY_ROW: dict[str, Any] = {
    "expected_answer": "",
    "case_id": "",
    "source_file": "",
    "source_location": "",
    "metadata": {},
    "import_warnings": [],
    "extra": {},
}


def _validate(file_name: str, data: bytes) -> ValidatedFile:
    try:
        return validate_file(file_name, io.BytesIO(data), len(data), max_bytes=settings.UPLOAD_MAX_BYTES)
    except FileRejected as exc:
        raise ImportRefused(exc.reason) from exc


def _save(
    *, agent: Agent, user: User | None, name: str, data: bytes, validated: ValidatedFile, result: FileImport, text: str
) -> Dataset:
    upload = SimpleUploadedFile(validated.original_name, data)
    with upload_dataset_stored(agent=agent, user=user, name=name[:120], upload=upload, validated=validated) as (
        dataset,
        document,
    ):
        # The file is the cases' source, never an attachment (the agent must not read the answers).
        case_bulk_create(dataset=dataset, cases=[{**row, "source_document": document} for row in result.cases])
        Document.objects.filter(pk=document.pk).update(text=text)
        dataset.status, dataset.notice, dataset.warnings = Dataset.Status.READY, result.notice, result.warnings
        dataset.mapping = {"tables": result.tables, "chosen": result.chosen, "total": result.total}
        dataset.save(update_fields=["status", "notice", "warnings", "mapping", "updated_at"])
    return dataset
