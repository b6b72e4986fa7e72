"""Tables to test cases, without a model.

A table is rows of sparse cells ({column number: text}) with the row numbers the
user sees. The header row is found among the first rows (test plans often start
with a title, a date and a blank line), by matching cells against synonyms. When
several columns could be the question (Scenario, Title, Test case, Question...),
they are ranked by how strongly the header names a question and by what the
column holds: sentence-like, question- or request-shaped text beats short labels
repeated across rows. The result is a *plan* per table (header row, a field per
column) that the user confirms or changes before any case is created
(mapping.py); each later row with a question becomes a case, and a row that
repeats the header starts a new table within the same sheet.

A column whose cells are steps quoting the user's message ("2. Ask: '...'") feeds the
question with that message ("quoted_question", steps.py) and is kept whole as metadata.
Several columns mapped to one text field are joined, each under its header. Columns
mapped to no field are kept on the case as metadata ({header: text}).
Everything doubtful about a row (a cell cut, an empty expected answer, a merged
value copied, a formula without a value) becomes a warning on that case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from datasets.extraction.headers import LOOKUP, header_field, is_header, normalise_header, question_strength
from datasets.extraction.steps import holds_messages, user_message

HEADER_SEARCH_ROWS = 30
# The database keeps any text field up to this (datasets.fields.MAX_TEXT_CHARS; the sandboxed
# child that imports this module runs without Django, so it cannot import that one).
MAX_TEXT_CHARS = 200_000
MAX_CASE_ID_CHARS = 100
MAX_TAG_CHARS = 50
MAX_TAGS = 20
MAX_METADATA_CHARS = 10_000
PREVIEW_ROWS = 5
PREVIEW_CELL_CHARS = 160
CONTENT_SAMPLE_ROWS = 60

# The fields a column can feed; "metadata" keeps the text on the case, "ignore" drops it.
# "quoted_question": the user's message quoted in the cell's steps is the question, and
# the whole cell is kept as metadata (steps.py).
FIELDS = (
    "question",
    "quoted_question",
    "expected_answer",
    "document_context",
    "tags",
    "case_id",
    "judge_guideline",
    "metadata",
    "ignore",
)
FIELD_LABELS = {
    "question": "Question",
    "quoted_question": "Quoted question",
    "expected_answer": "Expected answer",
    "document_context": "Context",
    "tags": "Tags",
    "case_id": "Case id",
    "judge_guideline": "Judge guideline",
    "metadata": "Keep as metadata",
    "ignore": "Ignore",
}
QUESTION_FIELDS = ("question", "quoted_question")
_SINGLE_FIELDS = ("question", "expected_answer", "document_context", "case_id", "judge_guideline")
SAMPLE_CELL_CHARS = 2_000

_REQUEST_START = re.compile(
    r"^(how|what|when|where|why|who|which|can|could|would|will|is|are|do|does|did|should|may|please|i |i'm|"
    r"my |we |tell|show|give|list|explain|help|find|create|cancel|reset|book|send|write|summari[sz]e)",
    re.IGNORECASE,
)
# Sheets that are not test cases, by name (a glossary, a change log, a tool table...)
# or by headers (a tool table lists tools and their parameters).
_NOT_CASES = re.compile(
    r"glossary|change ?log|changes|version history|revision|revisions|tools?|tool definitions|functions|definitions|"
    r"legend|readme|read me|about|abbreviations|terms"
)
_TOOL_HEADERS = ({"tool", "tool name", "function", "function name"}, {"parameters", "arguments", "args", "schema"})
_FORMULA_AFTER_SPACE = re.compile(r"^ [ \t]*[=+\-@]")
# A tab before a formula sign is how a spreadsheet user keeps a cell from running: kept as typed.
_TAB_GUARD = re.compile(r"^\t+[=+\-@]")


@dataclass
class Table:
    """One sheet, CSV file or document table. rows: (row number as shown to the user, {column: text})."""

    label: str  # "Sheet1", "Table 2", "" for a CSV
    rows: list[tuple[int, dict[int, str]]] = field(default_factory=list)
    unit: str = "row"  # Markdown tables count lines of the file
    # What the reader noticed, by (row number, column): a merged range's value copied
    # here ("B2:B3"), a formula with no cached value; and CSV rows' field counts.
    spread: dict[tuple[int, int], str] = field(default_factory=dict)
    formulas_without_value: set[tuple[int, int]] = field(default_factory=set)
    formulas: dict[tuple[int, int], str] = field(default_factory=dict)  # a formula's text, where a value was saved
    widths: dict[int, int] = field(default_factory=dict)
    notes: dict[int, list[str]] = field(default_factory=dict)  # row number -> reader warnings for that row
    part: int = 0  # the 2nd, 3rd... table found under another in the same sheet (split_tables)

    def location(self, row_number: int) -> str:
        return f"{self.label} {self.unit} {row_number}".strip()

    def rows_location(self, numbers: list[int]) -> str:
        shown = ", ".join(str(n) for n in numbers[:10])
        more = f" and {len(numbers) - 10} more" if len(numbers) > 10 else ""
        unit = self.unit if len(numbers) == 1 else f"{self.unit}s"
        return f"{self.label} {unit} {shown}{more}".strip()


@dataclass
class Plan:
    """How one table becomes cases: the header row and a field per column."""

    header_index: int | None  # index into table.rows
    columns: dict[int, str]  # column -> field (FIELDS)
    headers: dict[int, str]
    skipped: str = ""  # why the table holds no cases, "" when it does
    dropped: list[int] = field(default_factory=list)  # rows with cells but no question (table_cases)

    @property
    def question_column(self) -> int | None:
        return next((column for column, name in self.columns.items() if name in QUESTION_FIELDS), None)


def _header_index(table: Table) -> int | None:
    """The header row: the first that names two or more fields, else the first that names a
    question strongly, else the first that names one at all (a lone "Title" is a title)."""
    candidates = [i for i, (_, cells) in enumerate(table.rows[:HEADER_SEARCH_ROWS]) if is_header(cells)]
    hits = {i: [hit for hit in map(header_field, table.rows[i][1].values()) if hit] for i in candidates}
    for good in (
        lambda i: len(hits[i]) >= 2,
        lambda i: any(name == "question" and strength >= 2 for name, strength in hits[i]),
    ):
        found = next((i for i in candidates if good(i)), None)
        if found is not None:
            return found
    return candidates[0] if candidates else None


def split_tables(table: Table) -> list[Table]:
    """A sheet holding several tables one under the other: each new header row starts one."""
    first = _header_index(table)
    if first is None:
        return [table]
    starts = [first]
    for index in range(first + 1, len(table.rows)):
        cells = table.rows[index][1]
        exact = [normalise_header(text) in LOOKUP for text in cells.values()]
        if is_header(cells) and all(exact) and (len(exact) >= 2 or question_strength(cells) >= 2):
            starts.append(index)
    if len(starts) == 1:
        return [table]
    parts = []
    for number, (start, end) in enumerate(zip(starts, [*starts[1:], len(table.rows)], strict=True), start=1):
        rows = table.rows[start:end] if number > 1 else table.rows[:end]
        part = Table(label=table.label, rows=rows, unit=table.unit, part=number)
        part.spread, part.formulas_without_value, part.formulas = (
            table.spread,
            table.formulas_without_value,
            table.formulas,
        )
        part.widths, part.notes = table.widths, table.notes
        parts.append(part)
    return parts


def plan_table(table: Table) -> Plan:
    """The suggested plan: the first header row, then the best column for each field."""
    header_index = _header_index(table)
    if header_index is None:
        return _unmapped_plan(table)
    headers = dict(table.rows[header_index][1])
    data = [cells for _, cells in table.rows[header_index + 1 : header_index + 1 + CONTENT_SAMPLE_ROWS]]
    columns = {column: "metadata" for column in sorted(headers)}
    candidates: dict[str, list[tuple[float, int]]] = {}
    for column, text in headers.items():
        hit = header_field(text)
        if hit:
            name, strength = hit
            score = strength * 10 + (_content_score([row.get(column, "") for row in data]) if name == "question" else 0)
            candidates.setdefault(name, []).append((score, -column))
    for name, ranked in candidates.items():
        ranked.sort(reverse=True)
        best = -ranked[0][1]
        columns[best] = name
        if name == "tags":
            for _, column in ranked[1:]:
                columns[-column] = "tags"
    plan = Plan(header_index=header_index, columns=columns, headers=headers)
    _quote_steps(plan, data)
    keys = {normalise_header(text) for text in headers.values()}
    kind = _NOT_CASES.fullmatch(normalise_header(table.label))
    if kind or all(keys & names for names in _TOOL_HEADERS):
        what = f"a {kind.group(0)} sheet" if kind else "a table of tools and their parameters"
        plan.skipped = f"It looks like {what}, not test cases. Tick the box to use it anyway."
    elif not data:
        plan.skipped = "The table has its header row but no rows under it."
    elif not any(row.get(plan.question_column or 0, "").strip() for row in data):
        plan.skipped = f"The “{headers[plan.question_column or 0]}” column is empty."
    return plan


def _quote_steps(plan: Plan, data: list[dict[int, str]]) -> None:
    """Steps that quote the user's message ("2. Ask: '...'") give the question: the quoted
    message, unless a column named for what the user says holds plain messages already."""
    question = plan.question_column
    if question is None:
        return
    if holds_messages([row.get(question, "") for row in data]):
        plan.columns[question] = "quoted_question"
        return
    hit = header_field(plan.headers[question])
    if hit and hit[1] >= 3:
        return
    for column in sorted(plan.headers):
        if plan.columns[column] == "metadata" and holds_messages([row.get(column, "") for row in data]):
            plan.columns[question], plan.columns[column] = "metadata", "quoted_question"
            return


def _unmapped_plan(table: Table) -> Plan:
    """No header names a question: list the first row that looks like a header so the user can map it."""
    index = next((i for i, (_, cells) in enumerate(table.rows[:HEADER_SEARCH_ROWS]) if len(cells) >= 2), None)
    if index is None:
        reason = "No table: the sheet has no row with two or more cells." if table.rows else "The sheet is empty."
        return Plan(header_index=None, columns={}, headers={}, skipped=reason)
    headers = dict(table.rows[index][1])
    shown = ", ".join(text[:40] for _, text in sorted(headers.items())[:8])
    kind = _NOT_CASES.fullmatch(normalise_header(table.label))
    what = f"It looks like a {kind.group(0)} sheet, not test cases: no" if kind else "No"
    reason = f"{what} column names a question (headers: {shown})."
    return Plan(header_index=index, columns=dict.fromkeys(sorted(headers), "metadata"), headers=headers, skipped=reason)


def _content_score(values: list[str]) -> float:
    """0-6: how much a column's cells read like questions or requests rather than labels."""
    filled = [value.strip() for value in values if value.strip()]
    if not filled:
        return -20.0  # an empty column is never the question while another has text
    words = sum(len(value.split()) for value in filled) / len(filled)
    shaped = sum(1 for value in filled if value.endswith("?") or _REQUEST_START.match(value)) / len(filled)
    distinct = len(set(filled)) / len(filled)
    return min(words, 12) / 4 + shaped * 2 + distinct


def plan_from_choice(table: Table, suggested: Plan, choice: dict[int, str]) -> Plan:
    """The user's mapping for a table (columns they did not mention keep the suggestion)."""
    columns = {**suggested.columns, **{column: name for column, name in choice.items() if column in suggested.headers}}
    plan = Plan(header_index=suggested.header_index, columns=columns, headers=suggested.headers)
    if plan.question_column is None:
        plan.skipped = "No column is mapped to the question."
    return plan


def table_cases(table: Table, plan: Plan) -> list[dict[str, Any]]:
    """The cases one table holds under `plan`, each with its provenance, metadata and warnings."""
    if plan.skipped or plan.header_index is None or plan.question_column is None:
        return []
    cases: list[dict[str, Any]] = []
    header_width = table.widths.get(table.rows[plan.header_index][0])
    question_header = normalise_header(plan.headers[plan.question_column])
    for row_number, cells in table.rows[plan.header_index + 1 :]:
        if normalise_header(cells.get(plan.question_column, "")) == question_header:
            continue  # the header again: a second table in the same sheet
        case = _row_case(table, row_number, cells, plan)
        if case is None:
            plan.dropped.append(row_number)
            continue
        case["warnings"].extend(table.notes.get(row_number, []))
        case["warnings"].extend(_shape_warnings(plan, cells, table.widths.get(row_number), header_width))
        cases.append(case)
    return cases


def _shape_warnings(plan: Plan, cells: dict[int, str], width: int | None, header_width: int | None) -> list[str]:
    """A row with more or fewer cells than its header (CSV, Markdown), and cells under no header:
    what was padded, and where the extra cells went (kept as metadata by _row_case)."""
    unheaded = sorted(column for column, text in cells.items() if column not in plan.headers and text.strip())
    warnings = []
    check = "check the cells were read into the right columns."
    if width and header_width and width > header_width:
        extra = [column for column in unheaded if column > header_width]
        unheaded = [column for column in unheaded if column <= header_width]
        kept = (
            f"the cells past the last header were kept as metadata ({_column_names(extra)})"
            if extra
            else "the cells past the last header are empty"
        )
        warnings.append(f"The row has {width} cells but the header has {header_width}: {kept}; {check}")
    elif width and header_width and width < header_width:
        missing = [plan.headers[c] for c in sorted(plan.headers) if c > width and plan.columns.get(c) != "ignore"]
        padded = ", ".join(f"“{header}”" for header in missing[:5]) or "the last columns"
        warnings.append(f"The row has {width} cells but the header has {header_width}: {padded} left empty; {check}")
    if unheaded:
        warnings.append(f"Cells under no header were kept as metadata ({_column_names(unheaded)}).")
    return warnings


def _column_names(columns: list[int]) -> str:
    return ", ".join(f"“Column {column_letter(column)}”" for column in columns[:10])


def _row_case(table: Table, row_number: int, cells: dict[int, str], plan: Plan) -> dict[str, Any] | None:
    question_column = plan.question_column
    assert question_column is not None
    if not cells.get(question_column, "").strip():
        return None
    warnings: list[str] = []
    case: dict[str, Any] = {field: "" for field in _SINGLE_FIELDS}
    case.update(tags=[], metadata={}, span="", location=table.location(row_number), warnings=warnings)
    parts: dict[str, list[tuple[str, str]]] = {}  # field -> (header, text) of each column feeding it
    for column, name in plan.columns.items():
        raw = cells.get(column, "")
        header = plan.headers.get(column, f"column {column}")
        if name == "ignore":
            continue
        _cell_warnings(table, (row_number, column), raw, header, name, warnings)
        if not raw.strip():
            continue
        text = raw.rstrip() if _TAB_GUARD.match(raw) else raw.strip()
        if name == "metadata":
            key = header[:100]
            if key in case["metadata"]:  # two columns under one header: keep both, say so
                key = f"{header[:80]} (column {column_letter(column)})"
                warnings.append(f"Two columns have the same header “{header}”: this one is kept as “{key}”.")
            if len(text) > MAX_METADATA_CHARS:
                warnings.append(
                    f"The “{header}” cell has {len(text):,} characters; the first {MAX_METADATA_CHARS:,} were kept."
                )
            case["metadata"][key] = text[:MAX_METADATA_CHARS]
        elif name == "tags":
            case["tags"].extend(_tags(text, header, warnings))
        elif name == "quoted_question":
            _quoted_question(case, header, text, warnings)
        else:
            parts.setdefault(name, []).append((header, text))
    for column, raw in cells.items():
        # A cell under no header (past the header's end, or under an empty header cell) is kept.
        if column not in plan.headers and raw.strip():
            case["metadata"][f"Column {column_letter(column)}"] = raw.strip()[:MAX_METADATA_CHARS]
    for name, found in parts.items():
        text = found[0][1] if len(found) == 1 else "\n".join(f"{header}: {text}" for header, text in found)
        limit = MAX_CASE_ID_CHARS if name == "case_id" else MAX_TEXT_CHARS
        if len(text) > limit:
            where = " + ".join(f"“{header}”" for header, _ in found) + (" cell" if len(found) == 1 else " cells")
            warnings.append(f"The {where} has {len(text):,} characters; only the first {limit:,} were kept.")
            text = text[:limit]
        case[name] = text
    if len(case["tags"]) > MAX_TAGS:
        warnings.append(f"The row has {len(case['tags'])} tags; only the first {MAX_TAGS} were kept.")
        case["tags"] = case["tags"][:MAX_TAGS]
    if not case["expected_answer"]:
        warnings.append("No expected answer: the judge scores this case without a reference answer.")
    return case


def _cell_warnings(table: Table, place: tuple[int, int], raw: str, header: str, name: str, warnings: list[str]) -> None:
    """What the reader did to one cell of any column kept on the case (issue 48: a kept column's
    merged or formula cell was silent)."""
    if place in table.formulas_without_value:
        warnings.append(
            f"The “{header}” cell is a formula with no saved value, so it was read as empty. Open the file "
            "in Excel or LibreOffice, save it, and upload it again."
        )
    if not raw.strip():
        return
    if place in table.formulas:
        warnings.append(
            f"The “{header}” cell is a formula ({table.formulas[place]}); its saved value was imported, "
            "not the formula."
        )
    if name != "metadata" and _FORMULA_AFTER_SPACE.match(raw):
        warnings.append(
            f"The “{header}” cell starts with a space before “{raw.lstrip()[0]}”; the space was removed. "
            "Exports prefix such cells with ' so spreadsheets do not run them as formulas."
        )
    if place in table.spread:
        warnings.append(
            f"The “{header}” value comes from the merged cells {table.spread[place]}: "
            "it was copied to every cell of the range."
        )


def _quoted_question(case: dict[str, Any], header: str, text: str, warnings: list[str]) -> None:
    """The quoted user message is the question; the whole steps text stays on the case as metadata."""
    case["metadata"][header[:100]] = text[:MAX_METADATA_CHARS]
    message, count = user_message(text)
    if message:
        case["question"], case["question_from"] = message, header[:100]
        return
    case["question"], case["unquoted_from"] = text[:MAX_TEXT_CHARS], header[:100]  # derive.py may write it
    found = "quotes no user message" if not count else f"quotes {count} user messages"
    warnings.append(
        f"The “{header}” cell {found}, so its whole text is the question: edit the question, "
        "or map another column to it."
    )


def _tags(text: str, header: str, warnings: list[str]) -> list[str]:
    tags = []
    for tag in (part.strip() for part in re.split(r"[,;\n]", text)):
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS:
            warnings.append(f"A tag in “{header}” has {len(tag)} characters; it was cut to {MAX_TAG_CHARS}.")
            tag = tag[:MAX_TAG_CHARS].strip()
        tags.append(tag)
    return tags


def describe(table: Table, plan: Plan, key: str, case_count: int) -> dict[str, Any]:
    """What the mapping step shows for one table: its header, a field per column, the first rows."""
    rows = table.rows[plan.header_index + 1 :] if plan.header_index is not None else table.rows
    columns = sorted(plan.headers)
    preview = [
        {
            "row": number,
            "cells": [_preview_cell(cells.get(column, "")) for column in columns],
        }
        for number, cells in rows[:PREVIEW_ROWS]
    ]
    return {
        "key": key,
        "label": table.label,
        "part": table.part,
        "unit": table.unit,
        "header_row": table.rows[plan.header_index][0] if plan.header_index is not None else None,
        "columns": [
            {
                "index": column,
                "letter": column_letter(column),
                "header": plan.headers[column][:200],
                "field": plan.columns.get(column, "metadata"),
                "sample": next((_preview_cell(c[column]) for _, c in rows[:PREVIEW_ROWS] if c.get(column)), ""),
            }
            for column in columns
        ],
        "preview": preview,
        # The first rows in full (cut long), so the mapping step can show what they become
        # under any mapping the user picks without reading the file again (result_preview).
        "sample_rows": [
            {"row": number, "cells": {str(column): text[:SAMPLE_CELL_CHARS] for column, text in cells.items()}}
            for number, cells in rows[:PREVIEW_ROWS]
        ],
        "rows": len(rows),
        "cases": case_count,
        "skipped": plan.skipped or ("" if case_count else "No row under the header has a question."),
    }


def result_preview(described: dict[str, Any], columns: dict[str, str]) -> list[dict[str, Any]]:
    """The cases the first rows of a described table become under `columns` ({"4": "question"}):
    the same row reading as the import, on the rows `describe` kept."""
    headers = {int(c["index"]): c["header"] for c in described["columns"]}
    plan = Plan(header_index=0, columns={int(k): v for k, v in columns.items() if int(k) in headers}, headers=headers)
    if plan.question_column is None:
        return []
    table = Table(label=described["label"], unit=described["unit"])
    found = []
    for sample in described.get("sample_rows", []):
        cells = {int(column): text for column, text in sample["cells"].items()}
        case = _row_case(table, sample["row"], cells, plan)
        if case is not None:
            found.append({**case, "row": sample["row"], "question_from": case.get("question_from", "")})
    return found


def _preview_cell(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"


def column_letter(column: int) -> str:
    letters = ""
    while column > 0:
        column, remainder = divmod(column - 1, 26)
        letters = chr(65 + remainder) + letters
    return letters


def cell_text(value: Any) -> str:
    """A spreadsheet value as the user reads it: 3.0 -> "3", dates without midnight times."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text.removesuffix("T00:00:00")
    return str(value)
