"""Plain-text files: their decoding (NUL bytes, UTF-8 or Windows-1252, line by line) and the
CSV reader, for uploads (in the sandboxed child) and for an Evalsite-columns CSV read in the
web process (datasets.csv_import), so every CSV meets the same reading rules and warnings.
No Django here: the child imports this module.
"""

from __future__ import annotations

import csv
import io
import re

from datasets.extraction.errors import ExtractionFailed
from datasets.extraction.parsed import MAX_CSV_FIELD_CHARS, MAX_ROWS_PER_FILE, MAX_TEXT_CHARS, Parsed, lines_label
from datasets.extraction.tables import Table


def read_csv(path: str) -> Parsed:
    with open(path, "rb") as handle:
        text, warnings, bad_lines = decode_text(handle.read())
    table = csv_table(text, warnings, bad_lines)
    return Parsed(tables=[table], text=text[:MAX_TEXT_CHARS], warnings=warnings)


def csv_table(text: str, warnings: list[dict[str, str]], bad_lines: list[int], *, by_record: bool = False) -> Table:
    """The CSV's rows as one table, numbered by the file's line (by_record: by the record, as a
    spreadsheet shows a row with multi-line cells), with what looks wrong added to `warnings`.
    Also the reader of an Evalsite-columns CSV (datasets.csv_import), outside the sandbox."""
    table = Table(label="")
    csv.field_size_limit(MAX_CSV_FIELD_CHARS)
    # A lone CR in a file of LF lines is a line break inside a cell (Excel on a Mac writes
    # one): csv would end the row there and make two cases of one row (issue 48).
    stray_cr = "\n" in text and _CR_MARK not in text and _LONE_CR.search(text) is not None
    if stray_cr:
        text = _LONE_CR.sub(_CR_MARK, text)
    broken_rows: list[int] = []
    spanning: list[tuple[int, int, int, list[str]]] = []  # records over several lines, for _swallowed_rows
    delimiter = csv_delimiter(text[:65_536])
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    previous_line = 0
    header_width = 0
    try:
        for record_number, record in enumerate(reader, start=1):
            first_line, last_line = previous_line + 1, reader.line_num
            previous_line = last_line
            number = record_number if by_record else last_line
            if stray_cr and any(_CR_MARK in value for value in record):
                record = [value.replace(_CR_MARK, "\n") for value in record]
                broken_rows.append(number)
            values = {index + 1: value for index, value in enumerate(record) if value.strip()}
            if not values:
                continue
            if len(table.rows) >= MAX_ROWS_PER_FILE:
                message = (
                    f"The file has more than {MAX_ROWS_PER_FILE:,} rows; only the first {MAX_ROWS_PER_FILE:,} were "
                )
                warnings.append({"where": f"row {number}", "message": message + "read. Split it into smaller files."})
                break
            header_width = header_width or len(record)
            table.rows.append((number, values))
            table.widths[number] = len(record)
            notes = table.notes.setdefault(number, [])
            if any(first_line <= line <= last_line for line in bad_lines):
                notes.append("This row had bytes that are not valid in the file's encoding (see the file warnings).")
            if last_line > first_line:
                spanning.append((number, first_line, last_line, record))
    except csv.Error as exc:
        raise ExtractionFailed(
            f"The CSV file is malformed near line {reader.line_num}: fix it and upload again."
        ) from exc
    _swallowed_rows(table, spanning, delimiter, header_width, warnings)
    if broken_rows:
        message = (
            "A cell holds a lone carriage return (the line break Excel on a Mac writes inside a cell); it was read "
            "as a line break within the cell, not as the end of the row."
        )
        for number in broken_rows:
            table.notes.setdefault(number, []).append(message)
        warnings.append({"where": lines_label(broken_rows).replace("line", "row"), "message": message})
    _unclosed_quote(text, table, warnings)
    return table


_LONE_CR = re.compile(r"\r(?!\n)")
_CR_MARK = "\ue000"  # a private-use character stands for a lone CR while csv reads the rows


def _unclosed_quote(text: str, table: Table, warnings: list[dict[str, str]]) -> None:
    """An odd number of quotes with no swallowed rows: a quote typed inside a cell that is not
    quoted (csv keeps it as typed), named on its row; else the last quoted cell never closed."""
    if not text.count('"') % 2 or not table.rows or any("closing quote" in w["message"] for w in warnings):
        return
    typed = next((n for n, cells in table.rows if any(v.count('"') % 2 for v in cells.values())), None)
    if typed is not None:
        where = typed
        message = (
            "A cell holds a quote (\") that opens no quoted cell, so the file's quotes do not pair up; the cell was "
            "kept as typed. Check this row."
        )
    else:
        where = table.rows[-1][0]
        message = "A quote is never closed: the last row's quoted cell ran to the end of the file."
    table.notes.setdefault(where, []).append(message)
    warnings.append({"where": f"row {where}", "message": message})


def _swallowed_rows(
    table: Table, spanning: list[tuple[int, int, int, list[str]]], delimiter: str, width: int, warnings: list
) -> None:
    """Records over several lines whose lines look like rows of their own: a quote never closed."""
    # When the first column holds ids (1, 2, TC-3...), a line inside a cell that starts with one
    # starts a row too, even when it has fewer cells than the header (issue 48).
    firsts = [cells.get(1, "") for _, cells in table.rows[1:]]
    ids = len(firsts) >= 2 and sum(bool(_ID.match(cell.strip())) for cell in firsts) >= 0.8 * len(firsts)
    starts = re.compile(_ID.pattern.rstrip("$") + r"\s*" + re.escape(delimiter)) if ids else None
    for number, first_line, last_line, record in spanning:
        swallowed = _swallowed_lines(record, delimiter, width, starts)
        if swallowed:
            message = (
                f"A quoted cell opened on line {first_line} runs to line {last_line} and holds {swallowed} lines "
                "that look like rows of their own: a closing quote is probably missing."
            )
            table.notes.setdefault(number, []).append(message)
            warnings.append({"where": f"lines {first_line}-{last_line}", "message": message})


_ID = re.compile(r"^[A-Za-z]{0,6}[-_ ]?\d{1,6}$")


def _swallowed_lines(record: list[str], delimiter: str, width: int, starts: re.Pattern[str] | None) -> int:
    """How many lines inside this record's multi-line cells look like whole CSV rows."""
    if width < 2:
        return 0
    count = 0
    for value in record:
        if "\n" in value:
            lines = value.split("\n")[1:]
            count += sum(1 for line in lines if line.count(delimiter) >= width - 1 or (starts and starts.match(line)))
    return count


def csv_delimiter(sample: str) -> str:
    """The delimiter that splits the first lines into the same number (>1) of fields most often.

    csv.Sniffer guesses wrong on short files with quoted fields; this plain vote does not.
    """
    lines = sample.splitlines()[:20]
    best, best_score = ",", (0.0, 0)
    for delimiter in (",", ";", "\t", "|"):
        try:
            counts = [len(row) for row in csv.reader(lines, delimiter=delimiter) if any(cell.strip() for cell in row)]
        except csv.Error:
            continue
        if not counts:
            continue
        width = max(set(counts), key=counts.count)
        score = (counts.count(width) / len(counts) if width > 1 else 0.0, width)
        if score > best_score:
            best, best_score = delimiter, score
    return best


def decode_text(raw: bytes) -> tuple[str, list[dict[str, str]], list[int]]:
    """The file's text, what was changed to read it, and the lines with invalid bytes."""
    warnings: list[dict[str, str]] = []
    nuls = raw.count(b"\x00")
    if nuls:
        nul_lines = [number for number, line in enumerate(raw.split(b"\n"), start=1) if b"\x00" in line]
        warnings.append(
            {
                "where": lines_label(nul_lines),
                "message": f"The file held {nuls:,} NUL bytes (invisible control characters, often left by a "
                "broken export); they were removed and the text read as it is.",
            }
        )
        raw = raw.replace(b"\x00", b"")
    try:
        return raw.decode("utf-8-sig"), warnings, []
    except UnicodeDecodeError:
        pass
    # Line by line: a UTF-8 file with one line pasted from an ANSI file keeps its other lines.
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    decoded: list[str] = []
    ansi: list[int] = []
    replaced: list[int] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            decoded.append(line.decode("utf-8"))
            continue
        except UnicodeDecodeError:
            pass
        # Valid multi-byte UTF-8 on the line means UTF-8 with a damaged byte; none means the
        # ANSI code page, as Excel on Windows saves a CSV.
        utf8 = re.search(rb"[\xc2-\xf4][\x80-\xbf]", line) is not None
        text = line.decode("utf-8" if utf8 else "cp1252", errors="replace")
        (replaced if utf8 or "\ufffd" in text else ansi).append(number)
        decoded.append(text)
    utf8_elsewhere = any(re.search(r"[^\x00-\x7f]", text) for n, text in enumerate(decoded, 1) if n not in ansi)
    if ansi and not utf8_elsewhere and not replaced:
        message = (
            "The file is not UTF-8, so it was read as Windows-1252 (Western European), the encoding Excel uses on "
            "Windows. If accented letters look wrong on these lines, save the file as “CSV UTF-8” and upload it again."
        )
        warnings.append({"where": lines_label(ansi), "message": message})
    elif ansi:
        message = (
            "These lines are not UTF-8 while the rest of the file is: they were read as Windows-1252 (Western "
            "European), as if pasted from a file Excel saved on Windows. Check their accented letters, or save the "
            "file as CSV UTF-8."
        )
        warnings.append({"where": lines_label(ansi), "message": message})
    if replaced:
        message = (
            "Some bytes on these lines are not valid UTF-8 (in any encoding this file could be in) and were "
            "replaced with “\ufffd”: check these lines, or save the file as CSV UTF-8."
        )
        warnings.append({"where": lines_label(replaced), "message": message})
    return "\n".join(decoded), warnings, sorted(ansi + replaced)
