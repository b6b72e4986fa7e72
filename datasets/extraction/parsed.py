"""What a reader returns (Parsed), the limits every reader keeps, and how warnings name lines.

A leaf module: readers.py, text_files.py and markdown.py all build on it. No Django here:
the sandboxed child imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from datasets.extraction.tables import Table

MAX_ROWS_PER_FILE = 50_000
MAX_PAGES = 3_000
MAX_TEXT_CHARS = 5_000_000
MAX_MERGED_RANGES = 20_000
MAX_CSV_FIELD_CHARS = 20_000_000  # a cell longer than the 10 MB upload limit cannot exist


@dataclass
class Parsed:
    tables: list[Table] = field(default_factory=list)
    # Prose in reading order: (page number or None, text). Tables are not repeated here.
    pages: list[tuple[int | None, str]] = field(default_factory=list)
    text: str = ""  # the whole document as plain text, for Document.text (pages split by \f)
    # What the reader changed or doubts, for the whole file: [{"where": "lines 3, 9", "message": ...}].
    warnings: list[dict[str, str]] = field(default_factory=list)


def lines_label(lines: list[int]) -> str:
    if not lines:
        return ""
    shown = ", ".join(str(line) for line in lines[:10])
    more = f" and {len(lines) - 10} more" if len(lines) > 10 else ""
    return f"{'line' if len(lines) == 1 else 'lines'} {shown}{more}"
