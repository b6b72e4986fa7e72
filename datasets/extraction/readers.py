"""One reader per file type: tables with row numbers, prose with page numbers, and plain text.

Runs inside the sandboxed child (child.py), never in the web or worker process; the one
exception is the CSV reader (plain Python csv), which also reads an Evalsite-columns CSV
in the web process (datasets.csv_import), so every CSV is read by the same code.
Memory stays bounded by the file: XLSX sheets are streamed row by row and only
cells that hold a value are kept (a stray cell at XFD1048576 costs one entry,
not a million padded rows).
"""

from __future__ import annotations

import bisect
import re

from datasets.extraction.errors import ExtractionFailed
from datasets.extraction.markdown import read_markdown
from datasets.extraction.parsed import (
    MAX_MERGED_RANGES,
    MAX_PAGES,
    MAX_ROWS_PER_FILE,
    MAX_TEXT_CHARS,
    Parsed,
)
from datasets.extraction.tables import Table, cell_text, column_letter
from datasets.extraction.text_files import read_csv


def read(path: str, file_type: str) -> Parsed:
    readers = {
        "xlsx": read_xlsx,
        "xls": read_xls,
        "csv": read_csv,
        "md": read_markdown,
        "docx": read_docx,
        "pdf": read_pdf,
    }
    return readers[file_type](path)


# ---- spreadsheets ---------------------------------------------------------------


def read_xlsx(path: str) -> Parsed:
    import openpyxl
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet
    from openpyxl.worksheet._reader import FORMULA_TAG, WorkSheetParser

    class Parser(WorkSheetParser):
        # data_only gives None for a formula Excel never calculated: remember which cells those were,
        # and the formula of each cell that has one, so the case can say its value came from one.
        def parse_cell(self, element: object) -> dict:
            cell = super().parse_cell(element)
            formula = element.find(FORMULA_TAG)  # type: ignore[attr-defined]
            if formula is not None:
                cell["formula"] = f"={formula.text}" if formula.text else "a shared formula"
                if cell["value"] is None:
                    cell["no_value"] = True
            return cell

    # openpyxl only guards against billion-laughs and XXE through defusedxml.
    if not openpyxl.DEFUSEDXML:
        raise ExtractionFailed("The server cannot read workbooks safely right now (defusedxml is missing).")
    workbook = openpyxl.load_workbook(path, read_only=True, data_only=True, keep_links=False)
    parsed = Parsed()
    budget = MAX_ROWS_PER_FILE
    try:
        for sheet in workbook.worksheets:
            if not isinstance(sheet, ReadOnlyWorksheet):
                continue  # chart sheets hold no cells
            table = Table(label=sheet.title)
            # WorkSheetParser yields only the cells present in the XML, unlike iter_rows(),
            # which pads every row to the (untrusted) sheet dimension.
            with sheet._get_source() as source:
                parser = Parser(
                    source,
                    sheet._shared_strings,
                    data_only=True,
                    epoch=workbook.epoch,
                    date_formats=workbook._date_formats,
                    timedelta_formats=workbook._timedelta_formats,
                )
                for row_number, cells in parser.parse():
                    values = {cell["column"]: cell_text(cell["value"]) for cell in cells}
                    table.formulas_without_value.update(
                        (row_number, cell["column"]) for cell in cells if cell.get("no_value")
                    )
                    table.formulas.update(
                        ((row_number, cell["column"]), cell["formula"][:200])
                        for cell in cells
                        if "formula" in cell and not cell.get("no_value")
                    )
                    values = {column: text for column, text in values.items() if text.strip()}
                    for cell in cells:
                        if cell.get("data_type") == "e" and cell["value"]:  # #REF!, #DIV/0!, #N/A...
                            where, error = f"{column_letter(cell['column'])}{row_number}", cell["value"]
                            table.notes.setdefault(row_number, []).append(
                                f"The cell {where} holds the spreadsheet error {error}; it was read as that text."
                            )
                    if values:
                        table.rows.append((row_number, values))
                        budget -= 1
                    if budget <= 0:
                        break
                merged = parser.merged_cells.mergeCell if parser.merged_cells else []
            _fill_merged(table, [(m.min_row, m.min_col, m.max_row, m.max_col) for m in merged[:MAX_MERGED_RANGES]])
            _hidden_parts(table, sheet.sheet_state, parser, parsed.warnings)
            parsed.tables.append(table)
            if budget <= 0:
                parsed.warnings.append(_row_budget_warning(sheet.title))
                break
    finally:
        workbook.close()
    parsed.text = _tables_text(parsed.tables)
    return parsed


def _hidden_parts(table: Table, state: str, parser: object, warnings: list[dict[str, str]]) -> None:
    """A hidden sheet, hidden rows and hidden columns are read like the rest, but the person
    never saw them in Excel: each is named (issue 48)."""
    if not table.rows:
        return
    if state != "visible":
        message = "This sheet is hidden in the workbook; its rows were read like the others."
        warnings.append({"where": f"sheet {table.label}", "message": message})
    hidden = {"1", "true"}
    rows = {int(k) for k, v in parser.row_dimensions.items() if v.get("hidden") in hidden}  # type: ignore[attr-defined]
    for number, _ in table.rows:
        if number in rows:
            table.notes.setdefault(number, []).append("This row is hidden in the sheet; it was read like the others.")
    used = {column for _, cells in table.rows for column in cells}
    letters = [
        column_letter(index)
        for dimension in parser.column_dimensions.values()  # type: ignore[attr-defined]
        if dimension.get("hidden") in hidden
        for index in range(int(dimension.get("min", 0)), min(int(dimension.get("max", 0)), 16_384) + 1)
        if index in used
    ]
    if letters:
        shown = ", ".join(letters[:20])
        message = f"Hidden column{'s' if len(letters) > 1 else ''} {shown} of the sheet were read like the others."
        warnings.append({"where": table.label, "message": message})


def _row_budget_warning(where: str) -> dict[str, str]:
    return {
        "where": where,
        "message": f"The file has more than {MAX_ROWS_PER_FILE:,} rows; only the first {MAX_ROWS_PER_FILE:,} "
        "were read. Split it into smaller files.",
    }


def _fill_merged(table: Table, ranges: list[tuple[int, int, int, int]]) -> None:
    """Give every cell of a merged range the top-left value, as the user sees it on screen.

    Only rows that hold data of their own are filled, and only columns in use,
    so a hostile A1:XFD1048576 range costs nothing.
    """
    if not ranges or not table.rows:
        return
    numbers = [number for number, _ in table.rows]
    by_number = dict(table.rows)
    used_columns = sorted({column for _, cells in table.rows for column in cells})
    for min_row, min_col, max_row, max_col in ranges:
        value = by_number.get(min_row, {}).get(min_col)
        if not value:
            continue
        name = f"{column_letter(min_col)}{min_row}:{column_letter(max_col)}{max_row}"
        start, end = bisect.bisect_left(numbers, min_row), bisect.bisect_right(numbers, max_row)
        columns = used_columns[bisect.bisect_left(used_columns, min_col) : bisect.bisect_right(used_columns, max_col)]
        for number in numbers[start:end]:
            cells = by_number[number]
            for column in columns:
                if column not in cells:
                    cells[column] = value
                    table.spread[(number, column)] = name


def read_xls(path: str) -> Parsed:
    import xlrd

    try:
        book = xlrd.open_workbook(path, formatting_info=True, on_demand=True)
    except xlrd.biffh.XLRDError as exc:
        if "encrypt" in str(exc).lower():
            raise ExtractionFailed(
                "The workbook is password-protected. Remove the password and upload it again."
            ) from exc
        raise ExtractionFailed("The .xls workbook is damaged or not a real Excel 97-2003 file.") from exc
    parsed = Parsed()
    budget = MAX_ROWS_PER_FILE
    try:
        for index in range(book.nsheets):
            sheet = book.get_sheet(index)
            table = Table(label=sheet.name)
            for row_index in range(sheet.nrows):
                values = {}
                for col_index, cell in enumerate(sheet.row(row_index)):
                    text = _xls_cell_text(cell, book.datemode)
                    if text.strip():
                        values[col_index + 1] = text
                    if cell.ctype == xlrd.XL_CELL_ERROR:
                        error = xlrd.error_text_from_code.get(cell.value, "error")
                        table.notes.setdefault(row_index + 1, []).append(
                            f"The cell {column_letter(col_index + 1)}{row_index + 1} holds the spreadsheet error "
                            f"{error}; it was read as empty."
                        )
                if values:
                    table.rows.append((row_index + 1, values))
                    budget -= 1
                if budget <= 0:
                    break
            # xlrd ranges are half-open and zero-based: (rlo, rhi, clo, chi).
            merged = [(rlo + 1, clo + 1, rhi, chi) for rlo, rhi, clo, chi in sheet.merged_cells[:MAX_MERGED_RANGES]]
            _fill_merged(table, merged)
            _xls_hidden(table, sheet, parsed.warnings)
            parsed.tables.append(table)
            book.unload_sheet(index)
            if budget <= 0:
                parsed.warnings.append(_row_budget_warning(sheet.name))
                break
    finally:
        book.release_resources()
    parsed.text = _tables_text(parsed.tables)
    return parsed


def _xls_hidden(table: Table, sheet: object, warnings: list[dict[str, str]]) -> None:
    """Hidden sheets and rows of an .xls, as _hidden_parts names them for an .xlsx."""
    if not table.rows:
        return
    if getattr(sheet, "visibility", 0):
        message = "This sheet is hidden in the workbook; its rows were read like the others."
        warnings.append({"where": f"sheet {table.label}", "message": message})
    rows = getattr(sheet, "rowinfo_map", {})
    for number, _ in table.rows:
        if number - 1 in rows and rows[number - 1].hidden:
            table.notes.setdefault(number, []).append("This row is hidden in the sheet; it was read like the others.")


def _xls_cell_text(cell: object, datemode: int) -> str:
    import xlrd

    kind, value = cell.ctype, cell.value  # type: ignore[attr-defined]
    if kind == xlrd.XL_CELL_DATE:
        try:
            return cell_text(xlrd.xldate.xldate_as_datetime(value, datemode))
        except (ValueError, OverflowError, xlrd.xldate.XLDateError):
            return cell_text(value)
    if kind == xlrd.XL_CELL_BOOLEAN:
        return cell_text(bool(value))
    if kind in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return ""
    return cell_text(value)


def _tables_text(tables: list[Table]) -> str:
    lines: list[str] = []
    size = 0
    for table in tables:
        if table.label:
            lines.append(f"## {table.label}")
        for _, cells in table.rows:
            line = " | ".join(cells[column] for column in sorted(cells))
            lines.append(line)
            size += len(line)
            if size > MAX_TEXT_CHARS:
                return "\n".join(lines)
        lines.append("")
    return "\n".join(lines).strip()


def read_docx(path: str) -> Parsed:
    import docx
    from docx.table import Table as DocxTable

    # python-docx parses with resolve_entities=False, so XXE and entity bombs stay unexpanded.
    document = docx.Document(path)
    parsed = Parsed()
    prose: list[str] = []
    text: list[str] = []
    rows_left = MAX_ROWS_PER_FILE
    for block in document.iter_inner_content():
        if isinstance(block, DocxTable):
            table = Table(label=f"Table {len(parsed.tables) + 1}")
            # A cell element -> where it was first seen; the keys keep the elements alive, so lxml
            # hands back the same object for the same cell (an id() could be reused).
            first_place: dict[object, tuple[int, int]] = {}
            for row_number, row in enumerate(block.rows, start=1):
                cells = {index + 1: cell.text.strip() for index, cell in enumerate(row.cells)}
                cells = {column: value for column, value in cells.items() if value}
                # python-docx repeats a merged cell at every grid place it covers: name the copies.
                for index, cell in enumerate(row.cells):
                    place = first_place.setdefault(cell._tc, (row_number, index + 1))
                    if place != (row_number, index + 1) and index + 1 in cells:
                        table.spread[(row_number, index + 1)] = f"from row {place[0]}, column {column_letter(place[1])}"
                if cells:
                    table.rows.append((row_number, cells))
                    text.append(" | ".join(cells[c] for c in sorted(cells)))
                rows_left -= 1
                if rows_left <= 0:
                    parsed.warnings.append(_row_budget_warning(table.label))
                    break
            parsed.tables.append(table)
        else:
            paragraph = block.text.strip()
            if paragraph:
                prose.append(paragraph)
                text.append(paragraph)
        if rows_left <= 0 or sum(map(len, prose)) > MAX_TEXT_CHARS:
            break
    parsed.pages = [(None, "\n\n".join(prose))]
    parsed.text = "\n".join(text)[:MAX_TEXT_CHARS]
    return parsed


def read_pdf(path: str) -> Parsed:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, LimitReachedError, PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            # Owner-password-only PDFs open with an empty user password; those are readable.
            try:
                opened = reader.decrypt("")
            except (DependencyError, NotImplementedError) as exc:
                raise ExtractionFailed(_ENCRYPTED_PDF) from exc
            if not opened:
                raise ExtractionFailed(_ENCRYPTED_PDF)
        pages: list[tuple[int | None, str]] = []
        cut: list[dict[str, str]] = []
        size = 0
        for number, page in enumerate(reader.pages, start=1):
            if number > MAX_PAGES:
                cut.append({"where": f"page {number}", "message": f"Only the first {MAX_PAGES:,} pages were read."})
                break
            content = _clean_pdf_text(page.extract_text() or "")
            pages.append((number, content))
            size += len(content)
            if size > MAX_TEXT_CHARS and number < len(reader.pages):
                message = f"The text passes {MAX_TEXT_CHARS:,} characters here; the pages after this one were not read."
                cut.append({"where": f"page {number}", "message": message})
                break
    except FileNotDecryptedError as exc:
        raise ExtractionFailed(_ENCRYPTED_PDF) from exc
    except LimitReachedError as exc:
        # pypdf's cap on a stream's inflated size: not a PdfReadError, so name it here.
        raise ExtractionFailed(
            "The PDF holds a stream that unpacks to far more data than a normal document; it looks like a "
            "decompression bomb and was not read. Export the PDF again and upload the new copy."
        ) from exc
    except PdfReadError as exc:
        raise ExtractionFailed(
            "The PDF is damaged and cannot be read. Export it again and upload the new copy."
        ) from exc
    if not pages:
        raise ExtractionFailed("The PDF has no pages.")
    if not any(content.strip() for _, content in pages):
        raise ExtractionFailed(
            "The PDF has no text layer: it looks like scanned pages or images. Export it from the original "
            "document, or run it through OCR, and upload it again."
        )
    return Parsed(pages=pages, text="\f".join(content for _, content in pages), warnings=_empty_pages(pages) + cut)


def _empty_pages(pages: list[tuple[int | None, str]]) -> list[dict[str, str]]:
    """Pages with no text among pages with text: scans or images nothing was read from."""
    empty = [number for number, content in pages if number is not None and not content.strip()]
    if not empty:
        return []
    shown = ", ".join(str(number) for number in empty[:10]) + (
        f" and {len(empty) - 10} more" if len(empty) > 10 else ""
    )
    return [
        {
            "where": f"{'page' if len(empty) == 1 else 'pages'} {shown}",
            "message": "No text could be read from these pages (blank, or scanned pages or images with no text "
            "layer), so no test case comes from them. If they hold cases, export the PDF from the original "
            "document or run it through OCR.",
        }
    ]


_ENCRYPTED_PDF = "The PDF is encrypted (password-protected). Remove the password, save it, and upload it again."


def _clean_pdf_text(text: str) -> str:
    text = text.replace("\x00", "")
    return re.sub(r"[ \t]+\n", "\n", text).strip()
