"""A run as an XLSX workbook: a Summary sheet and the Results sheet (one row per result, the
same columns as the CSV), formatted for reading in a spreadsheet program."""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any

from django.utils import timezone

from runs import selectors
from runs.models import Run
from runs.reports.exporters import (
    ILLEGAL_XML,
    XLSX_CELL_LIMIT,
    cell_text,
    export_columns,
    extra_cells,
    result_row,
    summary_rows,
)


def _xlsx_cell(value: Any) -> Any:
    if isinstance(value, datetime):
        # Excel has no time zones: the local time of the console, as the pages show it.
        return timezone.localtime(value).replace(tzinfo=None)
    value = cell_text(value)
    if isinstance(value, str):
        value = ILLEGAL_XML.sub("", value)[:XLSX_CELL_LIMIT]
    return value


# Results sheet: each column's width (characters) and, for text, whether it wraps.
XLSX_WIDTHS = {"question": 48, "expected_answer": 48, "actual_answer": 56, "reasoning": 56, "error": 36}
XLSX_WRAPPED = {"question", "expected_answer", "actual_answer", "error", "reasoning", "scorers", "tool_calls"}
XLSX_NARROW = {"run_id": 8, "case_number": 8, "repeat": 8, "variant": 8, "score": 8, "status": 18}
DATE_FORMAT = "yyyy-mm-dd hh:mm:ss"
USD_FORMAT = '"$"#,##0.0000'
XLSX_FORMATS = {
    "score": "0.0",
    "finished_at": DATE_FORMAT,
    "agent_cost_usd": USD_FORMAT,
    "judge_cost_usd": USD_FORMAT,
    "simulator_cost_usd": USD_FORMAT,
}
SUMMARY_FORMATS = {
    "Pass rate": "0.0%",
    "Case pass rate (every repeat passed)": "0.0%",
    "Robustness (smoke variants passed)": "0.0%",
    "Agent cost (USD)": USD_FORMAT,
    "Judge cost (USD)": USD_FORMAT,
    "Simulator cost (USD)": USD_FORMAT,
    "Started": DATE_FORMAT,
    "Finished": DATE_FORMAT,
}


def run_export_xlsx(run: Run, *, site_url: str | None = None) -> bytes:
    """Summary first, then Results: a bold, frozen header with a filter, sized and wrapped
    columns, dates as dates and rates as percentages (write-only mode: one pass, low memory)."""
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Font
    from openpyxl.utils import get_column_letter

    workbook = Workbook(write_only=True)
    top, wrap = Alignment(vertical="top"), Alignment(vertical="top", wrap_text=True)
    bold = Font(bold=True)

    summary = workbook.create_sheet("Summary")
    summary.column_dimensions["A"].width = 44
    summary.column_dimensions["B"].width = 80
    for label, value in summary_rows(run, site_url):
        summary.append(
            [
                _styled(summary, label, font=bold, alignment=top),
                _styled(summary, value, number_format=SUMMARY_FORMATS.get(label), alignment=wrap),
            ]
        )

    results = workbook.create_sheet("Results")
    results.freeze_panes = "A2"
    columns, extra = export_columns(), extra_cells(run)
    for index, name in enumerate(columns, start=1):
        width = XLSX_WIDTHS.get(name) or XLSX_NARROW.get(name) or max(12, len(name) + 2)
        results.column_dimensions[get_column_letter(index)].width = width
    results.append([_styled(results, name, font=bold) for name in columns])
    styles = [(XLSX_FORMATS.get(name), wrap if name in XLSX_WRAPPED else top) for name in columns]
    rows = 0
    for result in selectors.result_list(run=run):
        values = result_row(run, result) + extra(result)
        results.append(
            [
                _styled(results, value, number_format=number_format, alignment=alignment)
                for value, (number_format, alignment) in zip(values, styles, strict=True)
            ]
        )
        rows += 1
    results.auto_filter.ref = f"A1:{get_column_letter(len(columns))}{rows + 1}"
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _styled(
    sheet: Any, value: Any, *, font: Any = None, alignment: Any = None, number_format: str | None = None
) -> Any:
    from openpyxl.cell import WriteOnlyCell

    cell = WriteOnlyCell(sheet, value=_xlsx_cell(value))
    if font is not None:
        cell.font = font
    if alignment is not None:
        cell.alignment = alignment
    if number_format and value is not None:
        cell.number_format = number_format
    return cell
