"""Mark a case's source in a document preview: the sheet row and cell, the Markdown lines,
the Word paragraphs, or the evidence span on a PDF page.

The preview blocks come from the sandboxed parse (datasets.extraction.preview) and are
cached per file; this only annotates a copy for one case. Every marked piece stays plain
text, escaped by the template like the rest of the preview.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from datasets.models import TestCase

Block = dict[str, Any]
MAX_SPAN_WORDS = 60

_LOCATION = re.compile(r"^(?:(?P<label>.*?)\s+)?(?P<unit>row|line|page|paragraph)\s+(?P<number>\d+)$")


@dataclass
class Place:
    label: str  # the sheet or table name, "" when the file has one table or for text
    unit: str  # row, line, page, paragraph
    number: int


def source_place(case: TestCase | None) -> Place | None:
    """Where the case's source_location points ("Plan row 12", "line 40", "page 3"), or None."""
    if case is None:
        return None
    match = _LOCATION.match(case.source_location.strip())
    if match is None:
        return None
    return Place(label=match["label"] or "", unit=match["unit"], number=int(match["number"]))


def mark_source(blocks: list[Block], case: TestCase | None) -> tuple[list[Block], bool]:
    """(blocks with the case's source marked, whether anything was marked)."""
    place = source_place(case)
    if case is None or place is None:
        return blocks, False
    blocks = copy.deepcopy(blocks)
    if place.unit in ("row", "line") and _mark_table_row(blocks, place, case):
        return blocks, True
    if place.unit == "line":
        return blocks, _mark_lines(blocks, place.number, case.source_span)
    if place.unit == "paragraph":
        return blocks, _mark_paragraphs(blocks, place.number, case.source_span)
    return blocks, False


def _mark_table_row(blocks: list[Block], place: Place, case: TestCase) -> bool:
    heading, tables_seen = "", 0
    for block in blocks:
        if block["kind"] == "heading":
            heading = block["text"]
            continue
        if block["kind"] != "table":
            continue
        tables_seen += 1
        # Sheets are headed by their name; Word tables are "Table N" in the reader.
        label = heading if heading else f"Table {tables_seen}" if place.label.startswith("Table ") else ""
        heading = ""
        if place.label and label != place.label:
            continue
        for number, cells in block["rows"]:
            if number != place.number:
                continue
            block["source_row"] = number
            wanted = {" ".join(text.split()) for text in (case.question, case.expected_answer) if text}
            block["source_cells"] = [index for index, cell in enumerate(cells) if " ".join(cell.split()) in wanted]
            return True
    return False


def _mark_lines(blocks: list[Block], first: int, span: str) -> bool:
    """A Markdown preview (one text block of the whole file): its lines, those of the case marked."""
    for block in blocks:
        if block["kind"] != "pre":
            continue
        lines = block["text"].split("\n")
        if first > len(lines):
            return False
        last = _span_end(lines, first, span)
        block["lines"] = [(number, text, first <= number <= last) for number, text in enumerate(lines, start=1)]
        return True
    return False


def _span_end(lines: list[str], first: int, span: str) -> int:
    """The last line of the case: where the span's last line is, after its first line."""
    wanted = [line.strip() for line in span.splitlines() if line.strip()]
    if not wanted:
        return first
    tail = wanted[-1][:60]
    for number in range(first, min(len(lines), first + 200) + 1):
        if tail and tail in lines[number - 1]:
            return number
    return first


def _mark_paragraphs(blocks: list[Block], first: int, span: str) -> bool:
    """Word: the reader counts non-empty paragraphs (headings too), as the preview lists them."""
    count = max(1, len([line for line in span.splitlines() if line.strip()]))
    seen = 0
    marked = False
    for block in blocks:
        if block["kind"] not in ("p", "heading"):
            continue
        seen += 1
        if first <= seen < first + count:
            block["is_source"] = True
            marked = True
    return marked


def page_pieces(text: str, span: str) -> list[tuple[str, bool]] | None:
    """A PDF page's text cut around the evidence span (matched whatever the spacing), or None."""
    words = span.split()[:MAX_SPAN_WORDS]
    if len(words) < 2:
        return None
    pattern = re.compile(r"\s+".join(re.escape(word) for word in words), re.IGNORECASE)
    match = pattern.search(text)
    if match is None:
        return None
    return [(text[: match.start()], False), (match.group(0), True), (text[match.end() :], False)]
