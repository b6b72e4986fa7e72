"""The mapping step of an upload: the user confirms (or changes) how each table's columns
become case fields, and whether to keep the first 500 cases of a larger file.

The first parse (services.dataset_extract) stores what it found on Dataset.mapping, and
what the sandbox read on Document.reading, and leaves the dataset in Review; nothing is
created yet. Confirming stores the choice and sends the job again, which applies that
choice to what was read (reading.py; the file is not read again) and creates the cases.
Dataset.mapping:

  {"method": "table", "total": 612, "limit": 500, "warnings": [...],
   "tables": [{"key": "0", "label": "Cases", "header_row": 3, "columns": [{"index": 4,
               "header": "Question", "field": "question", ...}], "preview": [...],
               "skipped": "", ...}],
   "chosen": {"tables": {"0": {"skip": false, "columns": {"4": "question", ...}}}},
   "keep_first": true}

The same choice comes from the command line and the API as JSON (`mapping_from_json`):
{"Cases": {"Question": "question", "Scenario": "ignore"}, "Glossary": "skip"}, keyed by
sheet or table name (or "*" for every table no other key names), columns by header, letter or
number.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from datasets.extraction.headers import normalise_header
from datasets.extraction.tables import FIELD_LABELS, FIELDS, QUESTION_FIELDS, column_letter
from datasets.jobs import EXTRACT, job_enqueue
from datasets.models import Dataset
from datasets.services import dataset_delete

# Fields a column named in a JSON mapping takes from the column suggested for them (which is
# kept as metadata): naming a new question column replaces the old one rather than adding to it.
REPLACED_FIELDS = (*QUESTION_FIELDS, "expected_answer", "document_context", "case_id", "judge_guideline")

FIELD_ALIASES = {
    **{name: name for name in FIELDS},
    **{normalise_header(label): name for name, label in FIELD_LABELS.items()},
    "expected": "expected_answer",
    "answer": "expected_answer",
    "context": "document_context",
    "id": "case_id",
    "guideline": "judge_guideline",
    "quoted": "quoted_question",
    "quoted message": "quoted_question",
    "question from steps": "quoted_question",
    "keep": "metadata",
    "skip": "ignore",
    "none": "ignore",
}


def field_name(value: Any) -> str | None:
    """A field from what a person typed ("Expected answer", "expected_answer", "id"), or None."""
    if not isinstance(value, str):
        return None
    key = value.strip().lower()
    return FIELD_ALIASES.get(key) or FIELD_ALIASES.get(normalise_header(key))


def suggested_choice(tables: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "tables": {
            table["key"]: {
                "skip": bool(table["skipped"]),
                "columns": {str(c["index"]): c["field"] for c in table["columns"]},
            }
            for table in tables
            if table["columns"]
        }
    }


def mapping_check(*, tables: list[dict[str, Any]], chosen: dict[str, Any]) -> dict[str, Any]:
    """Validate a choice against the tables found; returns it complete. Raises ValidationError
    naming the table and the column: one question column per table that is not skipped."""
    problems: list[str] = []
    result: dict[str, Any] = {"tables": {}}
    given = chosen.get("tables") or {}
    included = 0
    for table in tables:
        name = _table_name(table)
        suggested = {str(c["index"]): c["field"] for c in table["columns"]}
        choice = given.get(table["key"], {})
        columns = {**suggested, **{str(k): v for k, v in (choice.get("columns") or {}).items()}}
        skip = bool(choice.get("skip")) or (table["key"] not in given and bool(table["skipped"]))
        unknown = [key for key in columns if key not in suggested]
        bad = [value for value in columns.values() if value not in FIELDS]
        if unknown or bad:
            problems.append(f"{name}: unknown column or field ({', '.join(map(str, unknown + bad))}).")
            continue
        if not skip:
            questions = [key for key, value in columns.items() if value in QUESTION_FIELDS]
            if len(questions) != 1:
                problems.append(
                    f"{name}: map exactly one column to the question"
                    f"{'' if not questions else ' (now: ' + ', '.join(_header(table, q) for q in questions) + ')'}."
                )
            # Several columns may feed a text field (joined under their headers); a case has one id.
            for single in ("case_id",):
                picked = [key for key, value in columns.items() if value == single]
                if len(picked) > 1:
                    problems.append(
                        f"{name}: only one column can be the {FIELD_LABELS[single].lower()} "
                        f"({', '.join(_header(table, key) for key in picked)})."
                    )
            included += 1
        if table["columns"]:
            result["tables"][table["key"]] = {"skip": skip, "columns": columns}
    if not problems and tables and not included:
        problems.append("Every table is skipped: map a question column in at least one.")
    if problems:
        raise ValidationError(problems)
    return result


def mapping_from_json(*, tables: list[dict[str, Any]], raw: Any) -> dict[str, Any]:
    """A choice from the JSON a person writes (command line, API); see the module docstring."""
    if not isinstance(raw, dict):
        raise ValidationError('The mapping must be a JSON object, like {"Question": "question"}.')
    flat = all(isinstance(value, str) and field_name(value) and value.lower() != "skip" for value in raw.values())
    per_table = {"*": raw} if flat else raw
    problems: list[str] = []
    choice: dict[str, Any] = {"tables": {}}
    # "*" is every table a named key does not name: it goes first, so a named sheet wins
    # whatever the key order ({"*": "skip", "Test plan": {...}} keeps the test plan).
    for label, columns in sorted(per_table.items(), key=lambda item: item[0] != "*"):
        targets = tables if label == "*" else [t for t in tables if _table_key(t) == _label_key(label)]
        if not targets:
            known = ", ".join(f"“{_table_name(t)}”" for t in tables) or "none"
            problems.append(f"No sheet or table is named “{label}” (found: {known}).")
            continue
        for table in targets:
            entry = choice["tables"].setdefault(table["key"], {"skip": False, "columns": {}})
            entry["skip"] = columns == "skip" or columns is None
            if entry["skip"]:
                continue
            if columns == "include":
                continue
            if not isinstance(columns, dict):
                problems.append(f'{_table_name(table)}: give an object of columns and fields, or "skip".')
                continue
            for column, value in columns.items():
                index = _column_index(table, str(column))
                name = field_name(value)
                if index is None and label != "*":
                    problems.append(f"{_table_name(table)}: no column “{column}”.")
                elif name is None:
                    problems.append(f"“{column}”: unknown field “{value}” (use one of: {', '.join(FIELDS)}).")
                elif index is not None:
                    entry["columns"][str(index)] = name
    if flat and not any(entry["columns"] for entry in choice["tables"].values()):
        problems.append("None of the mapping's columns is in the file.")
    if problems:
        raise ValidationError(problems)
    for table in tables:
        entry = choice["tables"].get(table["key"])
        if entry is None or entry["skip"]:
            continue
        given = set(entry["columns"].values())
        if not entry["columns"] or (table["skipped"] and not given & set(QUESTION_FIELDS)):
            del choice["tables"][table["key"]]  # nothing said about it: the suggestion stands
            continue
        # A field the user gave to a column leaves the column suggested for it.
        for column in table["columns"]:
            key = str(column["index"])
            suggested = column["field"]
            taken = suggested in given or (suggested in QUESTION_FIELDS and given & set(QUESTION_FIELDS))
            if key not in entry["columns"] and taken and suggested in REPLACED_FIELDS:
                entry["columns"][key] = "metadata"
    return mapping_check(tables=tables, chosen=choice)


def _column_index(table: dict[str, Any], text: str) -> int | None:
    key = normalise_header(text)
    for column in table["columns"]:
        if normalise_header(column["header"]) == key and key:
            return column["index"]
    for column in table["columns"]:
        if text.strip().upper() == column["letter"] or text.strip() == str(column["index"]):
            return column["index"]
    return None


def _table_key(table: dict[str, Any]) -> str:
    return _label_key(table["label"] or "")


def _label_key(label: str) -> str:
    return " ".join(label.lower().split())


def _table_name(table: dict[str, Any]) -> str:
    part = f" (table {table['part']})" if table.get("part") else ""
    return f"“{table['label']}”{part}" if table["label"] else f"The table{part}"


def _header(table: dict[str, Any], key: str) -> str:
    column = next((c for c in table["columns"] if str(c["index"]) == key), None)
    return f"“{column['header']}”" if column else f"column {column_letter(int(key))}"


# ---- services ---------------------------------------------------------------------


def dataset_mapping_confirm(
    *, dataset: Dataset, chosen: dict[str, Any] | None, keep_first: bool, derive_questions: bool = False
) -> Dataset:
    """Review -> Extracting with the user's choice; the job creates the cases with it.

    Refuses a file over the case limit unless the user chose to keep the first cases.
    derive_questions: a model writes the user's message for steps that quote none (derive.py).
    """
    if dataset.status != Dataset.Status.REVIEW:
        raise ValidationError("This upload is not waiting for a mapping any more.")
    state = dict(dataset.mapping)
    tables = state.get("tables") or []
    clean = mapping_check(tables=tables, chosen=chosen if chosen is not None else suggested_choice(tables))
    limit, total = state.get("limit", 0), state.get("total", 0)
    if total > limit and not keep_first:
        raise ValidationError(
            f"The file has {total} test cases and at most {limit} can be kept: keep the first {limit}, or cancel."
        )
    state.update(chosen=clean, keep_first=keep_first, problem="", derive_questions=derive_questions)
    with transaction.atomic():
        updated = Dataset.objects.filter(pk=dataset.pk, status=Dataset.Status.REVIEW).update(
            status=Dataset.Status.EXTRACTING,
            mapping=state,
            job_attempts=0,
            job_started_at=None,
            updated_at=timezone.now(),
        )
        if not updated:
            raise ValidationError("This upload is not waiting for a mapping any more.")
        job_enqueue(EXTRACT, dataset.pk)
    dataset.refresh_from_db()
    return dataset


def dataset_upload_cancel(*, dataset: Dataset) -> None:
    """Give up an upload waiting in Review: the dataset and its file are deleted, no case is created."""
    if dataset.status != Dataset.Status.REVIEW:
        raise ValidationError("Only an upload waiting for its mapping can be cancelled.")
    dataset_delete(dataset=dataset)


def dataset_warnings_dismiss(*, dataset: Dataset) -> Dataset:
    """The team has read the import warnings: the dataset is plain Ready again.

    The cases keep their own warnings; the dataset's list is kept under mapping["dismissed_warnings"].
    """
    if not dataset.warnings:
        return dataset
    dataset.mapping = {**dataset.mapping, "dismissed_warnings": dataset.warnings}
    dataset.warnings = []
    dataset.save(update_fields=["warnings", "mapping", "updated_at"])
    return dataset
