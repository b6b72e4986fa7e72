"""Every write to datasets and test cases, imports of CSV and EvalSet files included.

What the fields are and how they are normalised is datasets.fields (`case_fields_clean`,
`scoring_fields_clean`); parsing a file is datasets.importers, writing one
datasets.exporters. The JSON export is here because it writes first: it gives every
case without one a stable case_id, kept on the case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from pathlib import PurePath
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import slugify

from agents.models import Agent
from datasets.csv_import import parse_csv
from datasets.exporters import dataset_to_eval_set
from datasets.fields import (
    NO_EXPECTED_ANSWER,
    case_field_errors,
    case_fields_clean,
    clean_text,
    dataset_name_clean,
    scoring_fields_clean,
)
from datasets.importers import ImportResult, file_kind, parse_eval_set
from datasets.models import Dataset, Document, TestCase
from evalsite.storage import stored_files_delete

# Called with the dataset after its scoring settings changed. runs registers the hook that makes
# the dataset's new judge configuration (runs.judging.configs), since datasets may not import runs.
_scoring_changed_hooks: list[Callable[[Dataset], None]] = []


def register_scoring_changed_hook(hook: Callable[[Dataset], None]) -> None:
    if hook not in _scoring_changed_hooks:
        _scoring_changed_hooks.append(hook)


# ---- datasets ------------------------------------------------------------------


_NAME_TAKEN = "This agent already has a dataset named “{name}”. Choose another name."


def _check_name_free(*, agent: Agent, name: str, exclude_pk: int | None = None) -> None:
    taken = Dataset.objects.filter(agent=agent, name__iexact=name)
    if exclude_pk is not None:
        taken = taken.exclude(pk=exclude_pk)
    if taken.exists():
        raise ValidationError({"name": [_NAME_TAKEN.format(name=name)]})


@transaction.atomic
def dataset_create(
    *,
    agent: Agent,
    user: User | None,
    name: str,
    source: str = Dataset.Source.MANUAL,
    status: str = Dataset.Status.READY,
    source_name: str = "",
    description: str = "",
    generation: dict | None = None,
    agent_reads_source: bool = False,
    eval_set_id: str = "",
    **scoring: Any,
) -> Dataset:
    """A new dataset. Refuses a 101st dataset for the agent and a name the agent already uses."""
    name = dataset_name_clean(name)
    scoring = scoring_fields_clean(scoring)
    # Lock the agent row so two concurrent creates cannot both pass the limit check.
    Agent.objects.select_for_update().filter(pk=agent.pk).first()
    limit = settings.EVALSITE_MAX_DATASETS_PER_AGENT
    if Dataset.objects.filter(agent=agent).count() >= limit:
        raise ValidationError(
            f"This agent already has {limit} datasets, the most it can have. Delete one you no longer need first."
        )
    _check_name_free(agent=agent, name=name)
    dataset = Dataset(
        agent=agent,
        name=name,
        description=clean_text(description),
        source=source,
        status=status,
        source_name=source_name[:255],
        generation=generation or {},
        agent_reads_source=agent_reads_source,
        eval_set_id=eval_set_id[:200],
        created_by=user if user is not None and user.is_authenticated else None,
        **scoring,
    )
    try:
        with transaction.atomic():
            dataset.save()
    except IntegrityError:
        # Lost a race with another create of the same name.
        raise ValidationError({"name": [_NAME_TAKEN.format(name=name)]}) from None
    return dataset


@transaction.atomic
def dataset_rename(*, dataset: Dataset, name: str) -> Dataset:
    name = dataset_name_clean(name)
    _check_name_free(agent=dataset.agent, name=name, exclude_pk=dataset.pk)
    dataset.name = name
    try:
        with transaction.atomic():
            dataset.save(update_fields=["name", "updated_at"])
    except IntegrityError:
        raise ValidationError({"name": [_NAME_TAKEN.format(name=name)]}) from None
    return dataset


@transaction.atomic
def dataset_update(*, dataset: Dataset, **fields: Any) -> Dataset:
    """Name, description and scoring settings in one call (the JSON API's PATCH)."""
    if "name" in fields:
        dataset_rename(dataset=dataset, name=fields.pop("name"))
    if "description" in fields:
        dataset.description = clean_text(fields.pop("description"))
        dataset.save(update_fields=["description", "updated_at"])
    if fields:
        dataset_update_settings(dataset=dataset, **fields)
    return dataset


def dataset_update_settings(*, dataset: Dataset, **scoring: Any) -> Dataset:
    """Scoring settings. Runs copy them when they start, so existing runs never change."""
    cleaned = scoring_fields_clean(scoring)
    for key, value in cleaned.items():
        setattr(dataset, key, value)
    dataset.save(update_fields=[*cleaned, "updated_at"])
    for hook in _scoring_changed_hooks:
        hook(dataset)
    return dataset


def dataset_delete(*, dataset: Dataset) -> None:
    """Delete the dataset, its cases and its documents (rows and files).

    Runs keep their own snapshot (RunCase rows; Run.dataset becomes NULL), so their
    results stay readable.
    """
    file_names = [name for name in Document.objects.filter(dataset=dataset).values_list("file", flat=True) if name]
    with transaction.atomic():
        dataset.delete()
        transaction.on_commit(partial(stored_files_delete, file_names))


def dataset_on_agent_delete(agent: Agent) -> None:
    """The agent-delete hook (agents/hooks.py), registered in DatasetsConfig.ready(): refused
    while a dataset of the agent is being extracted; the rows go with the agent (cascade),
    the documents' files once they are gone for good."""
    if Dataset.objects.filter(agent=agent, status=Dataset.Status.EXTRACTING).exists():
        raise ValidationError("A dataset of this agent is still being extracted. Wait for it to finish, then delete.")
    names = [name for name in Document.objects.filter(dataset__agent=agent).values_list("file", flat=True) if name]
    transaction.on_commit(partial(stored_files_delete, names))


# ---- test cases ----------------------------------------------------------------


def _check_case_id_free(*, dataset: Dataset, case_id: str, exclude_pk: int | None = None) -> None:
    if not case_id:
        return
    taken = dataset.cases.filter(case_id=case_id)
    if exclude_pk is not None:
        taken = taken.exclude(pk=exclude_pk)
    if taken.exists():
        raise ValidationError({"case_id": [f"Another test case in this dataset already uses the id “{case_id}”."]})


def _next_position(dataset: Dataset) -> int:
    last = dataset.cases.aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


def _check_accepts_cases(dataset: Dataset) -> None:
    # The extraction job writes its cases in one go and, when it fails, leaves none behind;
    # cases added by hand meanwhile would be caught up in that, so they wait until it settles.
    if dataset.status == Dataset.Status.EXTRACTING:
        raise ValidationError("Test cases are still being extracted. Add or import more once the dataset is Ready.")
    if dataset.status == Dataset.Status.REVIEW:
        raise ValidationError("Confirm the column mapping of the uploaded file first: that creates its test cases.")


def _settle_with_cases(dataset: Dataset) -> None:
    """A Failed dataset that gets cases (by hand, by import) is Ready: its status follows its cases.

    The upload's failure is not forgotten: it moves to the dataset's notice, which the page shows.
    """
    if dataset.status != Dataset.Status.FAILED:
        return
    what = f"The upload of “{dataset.source_name}”" if dataset.source_name else "Building this dataset"
    reason = dataset.failure_reason or "no reason was recorded."
    history = f"{what} failed: {reason} The test cases here were added afterwards."
    dataset.notice = f"{history}\n{dataset.notice}".strip()[:4000]
    dataset.status = Dataset.Status.READY
    dataset.save(update_fields=["status", "notice", "updated_at"])


@transaction.atomic
def case_create(*, dataset: Dataset, documents: Iterable[Document] = (), **fields: Any) -> TestCase:
    """Append a test case to the dataset (not while it is Extracting)."""
    _check_accepts_cases(dataset)
    cleaned = case_fields_clean(fields)
    _check_case_id_free(dataset=dataset, case_id=cleaned.get("case_id", ""))
    case = TestCase(dataset=dataset, position=_next_position(dataset), **cleaned)
    try:
        with transaction.atomic():
            case.save()
    except IntegrityError:
        raise ValidationError({"case_id": ["Another test case in this dataset already uses this id."]}) from None
    documents = list(documents)
    if documents:
        case.documents.set(documents)
    _settle_with_cases(dataset)
    return case


@transaction.atomic
def case_bulk_create(*, dataset: Dataset, cases: list[dict[str, Any]]) -> list[TestCase]:
    """Append many cases at once (importers, extraction, generation): all or nothing.

    Each dict holds case fields and optionally "documents" (the attachments, Document
    instances) and "source_document" (the file the case was read from). Errors name the
    case's number in the list and the field's label: "Case 3: Question: ...".
    """
    new_cases: list[TestCase] = []
    documents: list[list[Document]] = []
    seen_ids: set[str] = set()
    errors: list[str] = []
    for number, raw in enumerate(cases, start=1):
        raw = dict(raw)
        documents.append(list(raw.pop("documents", [])))
        source_document = raw.pop("source_document", None)
        try:
            cleaned = case_fields_clean(raw)
        except ValidationError as exc:
            errors.extend(case_field_errors(f"Case {number}", exc))
            continue
        case_id = cleaned.get("case_id", "")
        if case_id and case_id in seen_ids:
            errors.append(f"Case {number}: case_id: “{case_id}” is used twice.")
        seen_ids.add(case_id)
        new_cases.append(TestCase(dataset=dataset, source_document=source_document, **cleaned))
    if errors:
        raise ValidationError(errors)
    taken = set(dataset.cases.filter(case_id__in=seen_ids - {""}).values_list("case_id", flat=True))
    if taken:
        raise ValidationError([f"These case ids are already in the dataset: {', '.join(sorted(taken))}."])
    start = _next_position(dataset)
    for offset, case in enumerate(new_cases):
        case.position = start + offset
    created = TestCase.objects.bulk_create(new_cases)
    links = [
        TestCase.documents.through(testcase_id=case.pk, document_id=document.pk)
        for case, docs in zip(created, documents, strict=True)
        for document in docs
    ]
    if links:
        TestCase.documents.through.objects.bulk_create(links)
    if created:
        _settle_with_cases(dataset)
    return created


@transaction.atomic
def case_update(*, case: TestCase, **fields: Any) -> TestCase:
    """Change the given fields of a case (others stay as they are)."""
    cleaned = case_fields_clean(fields, partial=True)
    if cleaned.get("expected_answer") and case.import_warnings and "import_warnings" not in cleaned:
        # The person filled in what the import found missing: that warning no longer applies.
        cleaned["import_warnings"] = [w for w in case.import_warnings if not w.startswith(NO_EXPECTED_ANSWER)]
    if "case_id" in cleaned:
        _check_case_id_free(dataset=case.dataset, case_id=cleaned["case_id"], exclude_pk=case.pk)
    for key, value in cleaned.items():
        setattr(case, key, value)
    try:
        with transaction.atomic():
            case.save(update_fields=[*cleaned, "updated_at"])
    except IntegrityError:
        raise ValidationError({"case_id": ["Another test case in this dataset already uses this id."]}) from None
    return case


def case_delete(*, case: TestCase) -> None:
    # Runs point at their own RunCase copies (source_case is SET_NULL), so they are untouched.
    case.delete()


@transaction.atomic
def case_move(*, case: TestCase, to_index: int) -> int:
    """Move the case to a 0-based place in the order (clamped); returns the place it landed.

    Positions are renumbered 0..n-1 so gaps and ties left by deletes or imports disappear.
    """
    # Lock the dataset so two moves at once cannot interleave their renumbering.
    Dataset.objects.select_for_update().filter(pk=case.dataset_id).first()
    ordered = list(
        TestCase.objects.filter(dataset_id=case.dataset_id).order_by("position", "id").only("id", "position")
    )
    ids = [item.pk for item in ordered]
    ids.remove(case.pk)
    to_index = max(0, min(to_index, len(ids)))
    ids.insert(to_index, case.pk)
    new_position = {pk: index for index, pk in enumerate(ids)}
    changed = [item for item in ordered if item.position != new_position[item.pk]]
    for item in changed:
        item.position = new_position[item.pk]
    TestCase.objects.bulk_update(changed, ["position"])
    case.position = new_position[case.pk]
    return to_index


# ---- import, and the JSON export ---------------------------------------------------


def _apply_import(
    *,
    dataset: Dataset,
    cases: list[dict[str, Any]],
    ignored_columns: list[str],
    warnings: list[dict[str, str]] | None = None,
    skipped: list[str] | None = None,
    file_name: str = "",
) -> ImportResult:
    """Upsert parsed cases: a case_id already in the dataset updates that case (only the
    fields the file has), anything else is appended. The caller holds the transaction."""
    ids = [case["case_id"] for case in cases if case.get("case_id")]
    existing = {case.case_id: case for case in dataset.cases.filter(case_id__in=ids)}
    to_create: list[dict[str, Any]] = []
    to_update: list[TestCase] = []
    update_fields: set[str] = set()
    now = timezone.now()
    for fields in cases:
        current = existing.get(fields.get("case_id") or "")
        if current is None:
            to_create.append(fields)
            continue
        for key, value in fields.items():
            setattr(current, key, value)
        current.updated_at = now  # bulk_update skips auto_now
        update_fields.update(fields)
        to_update.append(current)
    if to_update:
        TestCase.objects.bulk_update(to_update, [*sorted(update_fields), "updated_at"])
    case_bulk_create(dataset=dataset, cases=to_create)
    skipped = skipped or []
    # What was skipped stays on the dataset page too, beside the other import warnings.
    kept_warnings = [*(warnings or []), *({"where": "", "message": item} for item in skipped)]
    if kept_warnings:
        named = [
            {
                "where": ", ".join(part for part in (file_name, item["where"]) if part),
                "message": item["message"],
            }
            for item in kept_warnings
        ]
        dataset.warnings = [*dataset.warnings, *named][-500:]
        dataset.save(update_fields=["warnings", "updated_at"])
    return ImportResult(
        created=len(to_create),
        updated=len(to_update),
        ignored_columns=ignored_columns,
        skipped=skipped,
        warnings=list(warnings or []),
    )


def _read_upload(file: UploadedFile) -> bytes:
    limit = settings.UPLOAD_MAX_BYTES
    if file.size is not None and file.size > limit:
        raise ValidationError(f"The file is {file.size / 1e6:.1f} MB; the limit is {limit / 1e6:.0f} MB.")
    data = file.read(limit + 1)
    if len(data) > limit:
        raise ValidationError(f"The file is larger than {limit / 1e6:.0f} MB, the limit.")
    if not data.strip():
        raise ValidationError("The submitted file is empty.")
    return data


def dataset_import_csv(*, dataset: Dataset, file: UploadedFile) -> ImportResult:
    """Import a CSV into the dataset: all rows or none."""
    _check_accepts_cases(dataset)
    parsed = parse_csv(_read_upload(file))
    with transaction.atomic():
        return _apply_import(
            dataset=dataset,
            cases=parsed.cases,
            ignored_columns=parsed.ignored_columns,
            warnings=parsed.warnings,
            file_name=file.name or "",
        )


def dataset_import_json(*, dataset: Dataset, file: UploadedFile) -> ImportResult:
    """Import an ADK/10xgraph EvalSet JSON into the dataset: all cases or none."""
    _check_accepts_cases(dataset)
    parsed = parse_eval_set(_read_upload(file))
    with transaction.atomic():
        if parsed.eval_set_id and not dataset.eval_set_id:
            Dataset.objects.filter(pk=dataset.pk).update(eval_set_id=parsed.eval_set_id)
            dataset.eval_set_id = parsed.eval_set_id
        return _apply_import(
            dataset=dataset, cases=parsed.cases, ignored_columns=[], skipped=parsed.skipped, file_name=file.name or ""
        )


def dataset_create_from_file(
    *, agent: Agent, user: User | None, name: str, file: UploadedFile
) -> tuple[Dataset, ImportResult]:
    """A new dataset filled from a CSV or EvalSet JSON file, in one transaction: a bad
    file leaves no empty dataset behind. An empty name falls back to the eval set's name
    or the file name."""
    data = _read_upload(file)
    kind = file_kind(file.name or "", data)
    parsed = parse_eval_set(data) if kind == "json" else parse_csv(data)
    scoring = parsed.scoring if kind == "json" else {}
    with transaction.atomic():
        dataset = dataset_create(
            agent=agent,
            user=user,
            # A fallback name is cut to the limit: the user never typed it, so must not be refused for it.
            name=name or (parsed.name or PurePath(file.name or "").stem or "Imported dataset")[:120],
            source=Dataset.Source.IMPORT,
            source_name=(file.name or "")[:255],
            description=parsed.description,
            eval_set_id=parsed.eval_set_id,
            **scoring,
        )
        result = _apply_import(
            dataset=dataset,
            cases=parsed.cases,
            ignored_columns=parsed.ignored_columns,
            warnings=parsed.warnings,
            skipped=parsed.skipped,
            file_name=file.name or "",
        )
    return dataset, result


def dataset_export_json(*, dataset: Dataset) -> dict[str, Any]:
    """The dataset as an EvalSet. Cases without a case_id get one first, kept on the case,
    and so does the dataset's eval_set_id: exporting again gives the same ids, and importing
    the file back into this dataset updates its cases instead of adding copies."""
    _identities_assign(dataset)
    return dataset_to_eval_set(dataset, dataset.cases.prefetch_related("documents").order_by("position", "id"))


@transaction.atomic
def _identities_assign(dataset: Dataset) -> None:
    if not dataset.eval_set_id:
        dataset.eval_set_id = (slugify(dataset.name) or f"dataset-{dataset.pk}")[:200]
        Dataset.objects.filter(pk=dataset.pk, eval_set_id="").update(eval_set_id=dataset.eval_set_id)
    cases = list(dataset.cases.select_for_update().order_by("position", "id").only("id", "case_id"))
    if all(case.case_id for case in cases):
        return
    used = {case.case_id for case in cases if case.case_id}
    changed = []
    for number, case in enumerate(cases, start=1):
        if case.case_id:
            continue
        # "case-N" from its place at the first export; a clash with an id someone typed gets a suffix.
        candidate, suffix = f"case-{number}", 2
        while candidate in used:
            candidate, suffix = f"case-{number}-{suffix}", suffix + 1
        used.add(candidate)
        case.case_id = candidate
        changed.append(case)
    TestCase.objects.bulk_update(changed, ["case_id"])
