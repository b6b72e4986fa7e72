"""Preview blocks for the document dialog: headings, paragraphs and capped tables.

Built in the sandboxed child like extraction, and rendered by a template with
autoescaping, so a hostile cell is shown as text and never becomes markup.
"""

from __future__ import annotations

from typing import Any

from datasets.extraction import readers
from datasets.extraction.tables import Table, column_letter

MAX_SHEETS = 5
MAX_ROWS = 200
MAX_COLUMNS = 30
MAX_BLOCKS = 600
MAX_CELL_CHARS = 2_000
MAX_TEXT_CHARS = 200_000

Block = dict[str, Any]


def build(path: str, file_type: str) -> list[Block]:
    if file_type == "docx":
        return _docx_blocks(path)
    parsed = readers.read(path, file_type)
    if file_type == "md":
        return [_text_block(parsed.text)]
    if file_type == "pdf":
        return [{"kind": "page", "page": page, "text": text[:MAX_TEXT_CHARS]} for page, text in parsed.pages[:100]]
    blocks: list[Block] = []
    for table in parsed.tables[:MAX_SHEETS]:
        if table.label:
            blocks.append({"kind": "heading", "text": table.label})
        blocks.append(_table_block(table))
    if len(parsed.tables) > MAX_SHEETS:
        blocks.append({"kind": "note", "text": f"{len(parsed.tables) - MAX_SHEETS} more sheets are in the file."})
    return blocks


def _table_block(table: Table) -> Block:
    columns = sorted({column for _, cells in table.rows for column in cells})[:MAX_COLUMNS]
    rows = [
        [row_number, [cells.get(column, "")[:MAX_CELL_CHARS] for column in columns]]
        for row_number, cells in table.rows[:MAX_ROWS]
    ]
    return {
        "kind": "table",
        "columns": [column_letter(column) for column in columns],
        "rows": rows,
        "more_rows": max(len(table.rows) - MAX_ROWS, 0),
        "unit": table.unit,
    }


def _text_block(text: str) -> Block:
    return {"kind": "pre", "text": text[:MAX_TEXT_CHARS], "truncated": len(text) > MAX_TEXT_CHARS}


def _docx_blocks(path: str) -> list[Block]:
    import docx
    from docx.table import Table as DocxTable

    document = docx.Document(path)
    blocks: list[Block] = []
    for block in document.iter_inner_content():
        if len(blocks) >= MAX_BLOCKS:
            blocks.append({"kind": "note", "text": "The rest of the document is not shown in the preview."})
            break
        if isinstance(block, DocxTable):
            rows: list[list[Any]] = []
            width = 0
            for row_number, row in enumerate(block.rows, start=1):
                if row_number > MAX_ROWS:
                    break
                cells = [cell.text.strip()[:MAX_CELL_CHARS] for cell in row.cells[:MAX_COLUMNS]]
                width = max(width, len(cells))
                rows.append([row_number, cells])
            blocks.append(
                {
                    "kind": "table",
                    "columns": [],
                    "rows": rows,
                    "more_rows": max(len(block.rows) - MAX_ROWS, 0),
                    "unit": "row",
                    "width": width,
                }
            )
            continue
        text = block.text.strip()
        if not text:
            continue
        style = (block.style.name or "").lower() if block.style is not None else ""
        kind = "heading" if style.startswith(("heading", "title")) else "p"
        blocks.append({"kind": kind, "text": text[:MAX_TEXT_CHARS]})
    return blocks
