"""The Markdown reader: its pipe tables with the file's line numbers, and the prose around them.

A table is a header row, a delimiter line (|---|---|) and the rows under it, as GitHub
writes it. Test plans written by hand bend that, and each bend must give one case per
row the person wrote, with a warning wherever the reading guessed (issue 48):
- a delimiter line again inside the table (a visual separator) is not a row;
- a blank line inside the table does not end it when table rows follow it;
- a row whose last "|" is missing goes on over the next lines that do not start with "|"
  (a long cell wrapped by hand), read as one row;
- rows that follow no header row are named, never dropped silently;
- a fenced code block is an example of the format: no case comes from it (a table in it is named).
A row's cell count is kept (Table.widths), so a row with more or fewer cells than its
header is a warning on its case (tables.table_cases).
Runs in the sandboxed child: no Django here.
"""

from __future__ import annotations

import re

from datasets.extraction.parsed import MAX_TEXT_CHARS, Parsed, lines_label
from datasets.extraction.tables import Table
from datasets.extraction.text_files import decode_text

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_TABLE_DELIMITER = re.compile(r"^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$")


def read_markdown(path: str) -> Parsed:
    with open(path, "rb") as handle:
        text, warnings, _ = decode_text(handle.read())
    lines = text.splitlines()
    tables: list[Table] = []
    prose: list[str] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence:
            index = _code_block(lines, index, fence.group(1), prose, warnings)
            continue
        if _starts_table(lines, index):
            table, index = _table(lines, index, warnings)
            tables.append(table)
            # The prose keeps one (empty) line per table line, so its line numbers are the file's.
            prose.extend([""] * (index - len(prose)))
            continue
        prose.append(lines[index])
        index += 1
    for table in tables:
        table.rows = [(number, cells) for number, cells in table.rows if cells]
    warnings.extend(_orphan_rows(prose))
    prose_text = "\n".join(prose) if any(line.strip() for line in prose) else ""
    return Parsed(tables=tables, pages=[(None, prose_text)], text=text[:MAX_TEXT_CHARS], warnings=warnings)


def _code_block(lines: list[str], index: int, fence: str, prose: list[str], warnings: list[dict[str, str]]) -> int:
    """Skip a fenced code block (an example of the format, not cases): its lines stay out of the
    tables and the prose, and a table in it is named. Returns the index after its closing fence."""
    end = next((i for i in range(index + 1, len(lines)) if lines[i].strip().startswith(fence)), None)
    if end is None:  # never closed: it would hide the rest of the file, so the rest is read as usual
        message = f"A code block opened on line {index + 1} is never closed; the lines after it were read as usual."
        warnings.append({"where": f"line {index + 1}", "message": message})
        prose.append(lines[index])
        return index + 1
    if any(_starts_table(lines, i) for i in range(index + 1, end)):
        message = "A table inside a code block was read as an example, not as test cases."
        warnings.append({"where": f"lines {index + 1}-{end + 1}", "message": message})
    prose.extend([""] * (end + 1 - index))
    return end + 1


def _starts_table(lines: list[str], index: int) -> bool:
    return (
        "|" in lines[index]
        and index + 1 < len(lines)
        and bool(_TABLE_DELIMITER.match(lines[index + 1]))
        and "-" in lines[index + 1]
    )


def _table(lines: list[str], index: int, warnings: list[dict[str, str]]) -> tuple[Table, int]:
    """The table whose header is on lines[index], and the index of the first line after it."""
    table = Table(label="", unit="line")
    piped = lines[index].strip().startswith("|")
    _add_row(table, index + 1, lines[index])
    width = table.widths[index + 1]
    index += 2
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            after = next((i for i in range(index, len(lines)) if lines[i].strip()), len(lines))
            if after == len(lines) or not _resumes(lines[after], piped, width) or _starts_table(lines, after):
                break
            message = (
                f"A blank line inside the table (line {index + 1}); the rows after it, from line {after + 1}, "
                "were read as rows of the same table."
            )
            warnings.append({"where": lines_label(list(range(index + 1, after + 1))), "message": message})
            index = after
            continue
        if "|" not in line:
            break
        if _TABLE_DELIMITER.match(line):
            index += 1  # a separator drawn between rows, not a row
            continue
        first = index
        while piped and not _closed(lines[index]) and index + 1 < len(lines) and _continues(lines[index + 1]):
            index += 1
        _add_row(table, first + 1, "\n".join(lines[first : index + 1]))
        if index > first:
            table.notes.setdefault(first + 1, []).append(
                f"The row is written over lines {first + 1}-{index + 1} (its last “|” was missing); "
                "they were read as one row."
            )
        index += 1
    return table, index


def _resumes(line: str, piped: bool, width: int) -> bool:
    """After a blank line, a line that goes on with the table: a row as wide as its header
    (and opening with "|" when the header does), not prose that happens to hold a "|"."""
    return (not piped or line.lstrip().startswith("|")) and _markdown_cells(line)[1] == width


def _closed(line: str) -> bool:
    stripped = line.rstrip()
    return stripped.endswith("|") and not stripped.endswith("\\|")


def _continues(line: str) -> bool:
    """A line that goes on with the row above: text that does not open a row of its own."""
    return bool(line.strip()) and not line.lstrip().startswith("|") and not _TABLE_DELIMITER.match(line)


def _add_row(table: Table, number: int, text: str) -> None:
    cells, width = _markdown_cells(text)
    table.rows.append((number, cells))
    table.widths[number] = width


def _markdown_cells(line: str) -> tuple[dict[int, str], int]:
    """The row's non-empty cells by column, and how many cells it has (empty ones too)."""
    line = line.strip()
    line = line.removeprefix("|")
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells = re.split(r"(?<!\\)\|", line)
    values = {}
    for index, cell in enumerate(cells):
        cell = re.sub(r"<br\s*/?>", "\n", cell.replace("\\|", "|"), flags=re.IGNORECASE).strip()
        if cell:
            values[index + 1] = cell
    return values, len(cells)


def _orphan_rows(prose: list[str]) -> list[dict[str, str]]:
    """Lines outside any table that look like table rows (| a | b |): no case is made from them."""
    numbers = [
        number
        for number, line in enumerate(prose, start=1)
        if line.strip().startswith("|") and _closed(line) and line.count("|") >= 3
    ]
    if not numbers:
        return []
    message = (
        "These lines look like table rows but follow no header row with a |---| line under it, so no test case "
        "was made from them. Add the header and delimiter lines above them, or join them to the table above."
    )
    return [{"where": lines_label(numbers), "message": message}]
