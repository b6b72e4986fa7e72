"""What the sandbox read in a file, kept as JSON, and the cases it holds under a mapping.

An upload is read once: the sandboxed child (child.py, mode "read") runs the reader and
answers with `dump(parsed)`, which the extraction job keeps on Document.reading while the
user confirms the mapping. `answer` applies a mapping to what was read (tables to cases,
labelled blocks, duplicates, warnings) and opens no file, so it runs in-process on a kept
reading, and in the child for its "extract" mode: one code path for both.

A reading is {"tables": [...], "pages": [[page, text]], "text": ..., "warnings": [...]}, or
{"failed": reason} when the file could not be read (`load` raises it again). Cells and the
reader's notes are lists of pairs, not objects, so their order survives a JSONB column.
No Django here: the child imports this module.
"""

from __future__ import annotations

from typing import Any

from datasets.extraction.dedupe import drop_exact
from datasets.extraction.errors import ExtractionFailed
from datasets.extraction.parsed import Parsed
from datasets.extraction.prose import labelled_cases
from datasets.extraction.tables import Table, describe, plan_from_choice, plan_table, split_tables, table_cases

SPREADSHEETS = ("xlsx", "xls", "csv")


def dump(parsed: Parsed) -> dict[str, Any]:
    """The reader's result as JSON (see the module docstring)."""
    return {
        "tables": [_table_dump(table) for table in parsed.tables],
        "pages": [[page, text] for page, text in parsed.pages],
        "text": parsed.text,
        "warnings": parsed.warnings,
    }


def failed(reason: str) -> dict[str, Any]:
    """A reading for a file the sandbox could not read: `load` fails with the same reason."""
    return {"failed": reason}


def load(reading: dict[str, Any]) -> Parsed:
    """The reader's result again, as the child had it; raises ExtractionFailed for a failed read."""
    if "failed" in reading:
        raise ExtractionFailed(reading["failed"])
    return Parsed(
        tables=[_table_load(table) for table in reading["tables"]],
        pages=[(page, text) for page, text in reading["pages"]],
        text=reading["text"],
        warnings=reading["warnings"],
    )


def _table_dump(table: Table) -> dict[str, Any]:
    return {
        "label": table.label,
        "unit": table.unit,
        "part": table.part,
        "rows": [[number, list(cells.items())] for number, cells in table.rows],
        "spread": [[row, column, name] for (row, column), name in table.spread.items()],
        "formulas_without_value": sorted(table.formulas_without_value),
        "formulas": [[row, column, text] for (row, column), text in table.formulas.items()],
        "widths": list(table.widths.items()),
        "notes": list(table.notes.items()),
    }


def _table_load(data: dict[str, Any]) -> Table:
    return Table(
        label=data["label"],
        unit=data["unit"],
        part=data["part"],
        rows=[(number, {column: text for column, text in cells}) for number, cells in data["rows"]],
        spread={(row, column): name for row, column, name in data["spread"]},
        formulas_without_value={(row, column) for row, column in data["formulas_without_value"]},
        # Readings kept before formulas were recorded have none.
        formulas={(row, column): text for row, column, text in data.get("formulas", [])},
        widths={row: width for row, width in data["widths"]},
        notes={row: list(messages) for row, messages in data["notes"]},
    )


def answer(parsed: Parsed, file_type: str, *, mapping: dict[str, Any] | None, max_cases: int) -> dict[str, Any]:
    """The file's cases. Tables follow `mapping` when given (the user's choice,
    {"tables": {key: {"skip": bool, "columns": {"3": "question"}}}}), else the suggested plan;
    the answer describes every table (header, field per column, first rows) for the mapping step."""
    found = _table_answers(parsed.tables, (mapping or {}).get("tables") or {})
    cases = found["cases"]
    methods = ["table"] if cases else []
    # The prose around the tables: PDFs keep their pages, Markdown its line numbers.
    prose: list[tuple[int | None, str]] = parsed.pages if file_type == "pdf" else [(None, parsed.text)]
    if file_type in ("md", "docx"):
        prose = parsed.pages
    unit = {"md": "line", "docx": "paragraph"}.get(file_type, "page")
    labelled, leftover = labelled_cases(prose, unit=unit) if file_type not in SPREADSHEETS else ([], prose)
    if labelled:
        cases.extend(labelled)
        methods.append("labelled")
    kept = drop_exact(cases)
    warnings = list(parsed.warnings) + found["dropped"] + _dropped_warnings(cases, kept)
    kept_cases = kept[:max_cases]
    return {
        "ok": True,
        "method": "+".join(methods),
        "cases": kept_cases,
        "total": len(kept),
        "header_found": found["header_found"],
        "header_only": found["header_only"] if not cases else [],
        # Every table, for the mapping step (the user may map one that gave no case).
        "tables": found["described"],
        # A reader's note on a row (a quote never closed) is a file warning already: said once.
        "warnings": warnings + _grouped_case_warnings(kept_cases, {item["message"] for item in parsed.warnings}),
        # Prose no table or labelled block took: the model may still find rules to test in it.
        "pages": [(page, text) for page, text in leftover if text.strip()],
        "text": parsed.text,
    }


def _table_answers(read_tables: list[Table], chosen: dict[str, Any]) -> dict[str, Any]:
    """Every table's cases (by the user's choice for it, else the suggested plan) and description."""
    result: dict[str, Any] = {"cases": [], "described": [], "header_found": False, "header_only": [], "dropped": []}
    tables = [part for table in read_tables for part in split_tables(table)]
    unread: list[dict[str, str]] = []
    for number, table in enumerate(tables):
        key = str(number)
        plan = plan_table(table)
        result["header_found"] = result["header_found"] or plan.question_column is not None
        if plan.header_index is not None and plan.header_index == len(table.rows) - 1:
            # A table with no row under its header.
            result["header_only"].append(", ".join(plan.headers[column] for column in sorted(plan.headers)))
        suggested = plan
        choice = chosen.get(key)
        if choice is not None:
            plan = plan_from_choice(table, plan, {int(column): name for column, name in choice["columns"].items()})
            if choice.get("skip"):
                plan.skipped = "You chose to skip this table."
        found = table_cases(table, plan)
        if plan.dropped and plan.question_column is not None:
            result["dropped"].extend(_dropped_rows(table, plan))
        if not found:
            unread.extend(_unread_table(table, suggested))
        result["described"].append(describe(table, plan, key, len(found)))
        # Rows whose steps quote no user message: the mapping step offers the model for them.
        result["described"][-1]["unquoted"] = sum(1 for case in found if case.get("unquoted_from"))
        result["cases"].extend(found)
    if result["cases"]:  # with no case at all, the job fails and says why instead
        result["dropped"].extend(unread)
    return result


def _unread_table(table: Table, plan: Any) -> list[dict[str, str]]:
    """A table of rows beside the cases with no column naming a question (a Word table split
    over pages, a sheet with its own headers): its rows are named, not dropped silently."""
    if plan.question_column is not None or plan.header_index is None or not plan.skipped.startswith("No column"):
        return []
    rows = len(table.rows) - plan.header_index - 1
    if rows < 1:
        return []
    message = f"{rows} row(s) under this table's first row gave no test cases. {plan.skipped}"
    return [{"where": table.location(table.rows[plan.header_index][0]), "message": message}]


def _dropped_rows(table: Table, plan: Any) -> list[dict[str, str]]:
    """Rows with cells but no question: one warning for those whose question is a formula
    Excel never calculated, one for the others."""
    header = plan.headers[plan.question_column]
    formulas = [row for row in plan.dropped if (row, plan.question_column) in table.formulas_without_value]
    others = [row for row in plan.dropped if row not in formulas]
    found = []
    if formulas:
        message = (
            f"The “{header}” cell is a formula with no saved value, so no test case was made from "
            f"{len(formulas)} row(s). Open the file in Excel or LibreOffice, save it, and upload it again."
        )
        found.append({"where": table.rows_location(formulas), "message": message})
    if others:
        message = f"{len(others)} row(s) have no “{header}” cell, so no test case was made from them."
        found.append({"where": table.rows_location(others), "message": message})
    return found


def _dropped_warnings(cases: list[dict[str, Any]], kept: list[dict[str, Any]]) -> list[dict[str, str]]:
    kept_ids = {id(case) for case in kept}
    dropped = [case.get("location", "") for case in cases if id(case) not in kept_ids]
    if not dropped:
        return []
    return [
        {
            "where": ", ".join(dropped[:10]) + (f" and {len(dropped) - 10} more" if len(dropped) > 10 else ""),
            "message": f"{len(dropped)} row(s) repeat an earlier case exactly (same question and expected answer) "
            "and were left out.",
        }
    ]


def _grouped_case_warnings(cases: list[dict[str, Any]], known: set[str]) -> list[dict[str, str]]:
    """One dataset warning per message not `known` already, naming every row it concerns
    (cases keep their own)."""
    grouped: dict[str, list[str]] = {}
    for case in cases:
        for message in case.get("warnings", []):
            if message in known:
                continue
            grouped.setdefault(message, []).append(case.get("location", ""))
    return [
        {
            "where": ", ".join(places[:10]) + (f" and {len(places) - 10} more" if len(places) > 10 else ""),
            "message": message if len(places) == 1 else f"{len(places)} cases: {message}",
        }
        for message, places in grouped.items()
    ]
