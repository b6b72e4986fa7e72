"""A CSV in Evalsite's columns (our own export, or any file whose header names a question
column) to cleaned test case fields: all rows or none.

The file is read by the one CSV reader, the upload pipeline's (extraction.text_files.csv_table:
encoding, separator, NUL bytes, quotes that never close), so every CSV meets the same
reading rules and warnings. The header row then maps itself: CSV_COLUMNS is the mapping,
confirmed by the column names, so no mapping step is shown. The rules of this import live
here: partial updates (only the columns present are returned, so a re-import updates just
those fields of cases matched by case_id), our own export's leading apostrophes taken off,
one row per case_id, and a row with more cells than the header refused.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from datasets.extraction.errors import ExtractionFailed
from datasets.extraction.tables import Table, column_letter
from datasets.extraction.text_files import csv_delimiter, csv_table, decode_text
from datasets.fields import CSV_FIELDS, case_field_errors, case_fields_clean, unneutralise
from datasets.importers import ParsedFile, case_count_check, refusal

# A header of this many columns, each one a case field, is Evalsite's own CSV export.
OWN_EXPORT_MIN_COLUMNS = 10

# Normalised header -> case field: each field's own name (the columns an export writes),
# and the other names files use for them.
CSV_COLUMNS = {
    **{column.name: column.name for column in CSV_FIELDS},
    "query": "question",
    "expected_results": "expected_answer",
    "expected_result": "expected_answer",
    "expected_output": "expected_answer",
    "reference": "expected_answer",
    "eval_id": "case_id",
    "expected_retrieval_context": "expected_context",
    # The peer bench's harness and many tools write id / expected.
    "id": "case_id",
    "expected": "expected_answer",
}

NOT_UTF8 = "In Excel, choose “Save as: CSV UTF-8”; elsewhere, save or export as UTF-8."


def header_key(cell: str) -> str:
    return re.sub(r"[\s\-]+", "_", cell.strip().lstrip("\ufeff").lower())


def csv_is_test_plan(head: bytes) -> bool:
    """A CSV with a readable header row that names no question column as parse_csv reads them:
    a test plan of its own shape, for the mapping step. (parse_csv explains any other refusal.)"""
    first = head.split(b"\n", 1)[0]
    try:
        line = first.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    header = [cell for cell in next(csv.reader([line], delimiter=csv_delimiter(line)), []) if cell.strip()]
    return bool(header) and "\x00" not in line and all(CSV_COLUMNS.get(header_key(c)) != "question" for c in header)


@dataclass
class _Header:
    """The header row mapped: a field per column number, and the columns kept as metadata."""

    width: int
    fields: dict[int, str] = field(default_factory=dict)
    kept: dict[int, str] = field(default_factory=dict)  # column -> header, for columns kept as metadata
    ignored: list[str] = field(default_factory=list)  # those headers as written, for the message
    warnings: list[dict[str, str]] = field(default_factory=list)

    @property
    def own_export(self) -> bool:
        return self.width >= OWN_EXPORT_MIN_COLUMNS and len(self.fields) == self.width


def parse_csv(data: bytes) -> ParsedFile:
    """Cases from a CSV: UTF-8 with or without BOM, comma, semicolon, tab or bar separated.

    Header names are matched without regard to case or spaces (`Expected Results` works).
    Raises one ValidationError listing every bad row by its number, as a spreadsheet shows it.
    """
    text, warnings = _text(data)
    reader_warnings: list[dict[str, str]] = []
    try:
        table = csv_table(text, reader_warnings, [], by_record=True)
    except ExtractionFailed as exc:
        raise ValidationError(exc.reason) from None
    if not table.rows:
        raise ValidationError(
            "The file is empty: the first row should name the columns (question, expected_answer, …)."
        )
    header = _header(*table.rows[0], width=table.widths[table.rows[0][0]])
    cases, problems, row_warnings = _cases(table, header)
    if problems:
        raise refusal(problems)
    if not cases:
        names = ", ".join(cell.strip() for _, cell in sorted(table.rows[0][1].items()))[:200]
        raise ValidationError(f"The file has its header row ({names}) but no rows under it: add a row per test case.")
    case_count_check(len(cases))
    return ParsedFile(
        cases=cases,
        ignored_columns=header.ignored,
        warnings=[*warnings, *header.warnings, *row_warnings, *reader_warnings],
    )


def _text(data: bytes) -> tuple[str, list[dict[str, str]]]:
    """The file's text and what was changed to read it; a file that is not UTF-8 is refused."""
    text, warnings, bad_lines = decode_text(data)
    if bad_lines:
        where = f"line {bad_lines[0]}" + (f" and {len(bad_lines) - 1} more" if len(bad_lines) > 1 else "")
        # What the upload would have guessed, so the person knows which encoding to convert from.
        guess = next((" They look like Windows-1252 (Western European) text, as Excel on Windows saves a CSV."
                      for item in warnings if "Windows-1252" in item["message"]), "")  # fmt: skip
        raise ValidationError(
            f"The file is not UTF-8 text ({where} holds bytes that are not valid UTF-8).{guess} {NOT_UTF8}"
        )
    return text, warnings


def _header(number: int, cells: dict[int, str], *, width: int) -> _Header:
    header = _Header(width=width)
    seen: dict[str, str] = {}
    problems: list[str] = []
    for column, cell in sorted(cells.items()):
        name = cell.strip()
        target = CSV_COLUMNS.get(header_key(cell))
        if target in seen:
            problems.append(f"Row {number}: the columns “{seen[target]}” and “{name}” both hold {target}; keep one.")
        if target:
            seen[target] = name
            header.fields[column] = target
        else:
            header.ignored.append(name)
            kept = name.lstrip("\ufeff")[:100]
            if kept in header.kept.values():  # two columns under one header: both are kept
                kept = f"{kept[:80]} (column {column_letter(column)})"
                message = f"Two columns have the same header “{name}”: the one in column {column_letter(column)} "
                header.warnings.append({"where": f"row {number}", "message": message + f"is kept as “{kept}”."})
            header.kept[column] = kept
    if "question" not in seen:
        found = ", ".join(cell.strip() for _, cell in sorted(cells.items()))
        raise ValidationError(f"The file needs a “question” (or “query”) column. The columns found are: {found}.")
    if problems:
        raise refusal(problems)
    return header


def _cases(table: Table, header: _Header) -> tuple[list[dict[str, Any]], list[str], list[dict[str, str]]]:
    """The rows under the header as cleaned cases, the problems that refuse the file, and the warnings."""
    cases: list[dict[str, Any]] = []
    problems: list[str] = []
    warnings: list[dict[str, str]] = []
    case_id_rows: dict[str, int] = {}
    for number, cells in table.rows[1:]:
        width = table.widths[number]
        if any(column > header.width for column in cells):
            problems.append(f"Row {number}: it has {width} cells but the header has {header.width} columns.")
            continue
        values, notes = _row_values(cells, width, header)
        warnings.extend({"where": f"row {number}", "message": note} for note in notes)
        # What the reader noticed on this row (a quote never closed) is already a file warning.
        notes += table.notes.get(number, [])
        if notes:
            values["import_warnings"] = notes
        try:
            fields = case_fields_clean(values, partial=True)
        except ValidationError as exc:
            problems.extend(case_field_errors(f"Row {number}", exc))
            continue
        case_id = fields.get("case_id", "")
        if case_id in case_id_rows:
            problems.append(f"Row {number}: case_id “{case_id}” is already used on row {case_id_rows[case_id]}.")
            continue
        if case_id:
            case_id_rows[case_id] = number
        cases.append(fields)
    return cases, problems, warnings


def _row_values(cells: dict[int, str], width: int, header: _Header) -> tuple[dict[str, Any], list[str]]:
    """One row's fields (only the header's), with its notes: a short row, an empty expected answer."""
    # Our own export prefixed formula-like cells with "'" (fields.neutralise): take it off
    # again. Any other file's leading apostrophe was typed, and is kept as typed.
    typed = unneutralise if header.own_export else str
    values: dict[str, Any] = {target: typed(cells.get(column, "")) for column, target in header.fields.items()}
    if header.kept:
        values["metadata"] = {name: cells[column].strip() for column, name in header.kept.items() if column in cells}
    notes = []
    if width < header.width:
        notes.append(f"The row has {width} fields but the header has {header.width}; the missing cells are empty.")
    if "expected_answer" in values and not values["expected_answer"].strip():
        notes.append("No expected answer: the judge scores this case without a reference answer.")
    return values, notes
