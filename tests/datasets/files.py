"""Real documents built in tests: XLSX (openpyxl), XLS (xlwt), DOCX (python-docx), PDF (reportlab),
and the hostile ones (zip bombs, XXE, billion laughs, renamed executables)."""

from __future__ import annotations

import csv
import functools
import io
import re
import zipfile
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile

Rows = Sequence[Sequence[Any]]

CONTENT_TYPES = {
    "pdf": "application/pdf",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "xls": "application/vnd.ms-excel",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "csv": "text/csv",
    "md": "text/markdown",
}


def upload(name: str, data: bytes) -> SimpleUploadedFile:
    extension = name.rsplit(".", 1)[-1].lower()
    return SimpleUploadedFile(name, data, content_type=CONTENT_TYPES.get(extension, "application/octet-stream"))


def qa_rows(count: int, *, start: int = 1) -> list[list[str]]:
    return [
        [f"Question number {n}: how do I reset password variant {n}?", f"Answer {n}"]
        for n in range(start, start + count)
    ]


# ---- spreadsheets ---------------------------------------------------------------


def xlsx_bytes(sheets: dict[str, Rows], *, merges: dict[str, list[str]] | None = None) -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(list(row))
        for cell_range in (merges or {}).get(title, []):
            sheet.merge_cells(cell_range)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def with_cached_values(data: bytes, values: dict[str, str]) -> bytes:
    """Give formula cells the value Excel would have cached (openpyxl writes formulas without one).

    values: {"B5": "cached text"}; the cell must hold a formula.
    """

    def patch(xml: str) -> str:
        for ref, value in values.items():
            pattern = rf'<c r="{ref}"[^>]*><f>(.*?)</f>(?:<v\s*/>|<v></v>)?</c>'
            xml = re.sub(pattern, rf'<c r="{ref}" t="str"><f>\1</f><v>{value}</v></c>', xml)
        return xml

    return rewrite_zip(data, {name: patch for name in _zip_names(data) if name.startswith("xl/worksheets/sheet")})


def stray_cell_xlsx(rows: Rows) -> bytes:
    """A small workbook with one stray cell at XFD1048576 (the last cell of a sheet)."""
    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Cases"
    for row in rows:
        sheet.append(list(row))
    sheet["XFD1048576"] = "x"
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def xls_bytes(sheets: dict[str, Rows], *, merges: dict[str, list[tuple[int, int, int, int]]] | None = None) -> bytes:
    """An Excel 97-2003 workbook. merges: {sheet: [(first_row, last_row, first_col, last_col)]}, zero-based."""
    import xlwt

    workbook = xlwt.Workbook()
    for title, rows in sheets.items():
        sheet = workbook.add_sheet(title)
        merged = (merges or {}).get(title, [])
        for r1, r2, c1, c2 in merged:
            sheet.write_merge(r1, r2, c1, c2, rows[r1][c1])
        covered = {(r, c) for r1, r2, c1, c2 in merged for r in range(r1, r2 + 1) for c in range(c1, c2 + 1)}
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                if (r, c) not in covered and value not in (None, ""):
                    sheet.write(r, c, value)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def csv_bytes(rows: Rows, *, delimiter: str = ",", bom: bool = False, encoding: str = "utf-8") -> bytes:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter).writerows(rows)
    data = out.getvalue().encode(encoding)
    return (b"\xef\xbb\xbf" + data) if bom else data


# ---- Word ---------------------------------------------------------------------------


def docx_bytes(blocks: Iterable[str | Rows]) -> bytes:
    """Paragraphs (str) and tables (lists of rows), in order."""
    import docx

    document = docx.Document()
    for block in blocks:
        if isinstance(block, str):
            document.add_paragraph(block)
            continue
        rows = list(block)
        table = document.add_table(rows=len(rows), cols=max(len(r) for r in rows))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                table.cell(r, c).text = str(value)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# ---- PDF ----------------------------------------------------------------------------


def pdf_bytes(pages: Sequence[Sequence[str]], *, encrypt: str | None = None) -> bytes:
    """One list of lines per page, drawn as real text."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=A4, encrypt=encrypt)
    for lines in pages:
        y = 800
        for line in lines:
            pdf.drawString(50, y, line)
            y -= 16
        pdf.showPage()
    pdf.save()
    return out.getvalue()


def image_only_pdf(pages: int = 2) -> bytes:
    """Pages with drawings only, as a scan without OCR would be: no text layer."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=A4)
    for _ in range(pages):
        for i in range(40):
            pdf.rect(50, 780 - i * 18, 300 + (i * 7) % 150, 10, fill=1)
        pdf.showPage()
    pdf.save()
    return out.getvalue()


# ---- hostile files ------------------------------------------------------------------


def pe_executable() -> bytes:
    return b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00" + b"\x00" * 48 + b"PE\x00\x00" + b"\x00" * 2000


def plain_zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("notes.txt", "hello")
        archive.writestr("data/values.csv", "a,b\n1,2\n")
    return out.getvalue()


@functools.cache
def zip_bomb_xlsx(inflated_mb: int = 1024) -> bytes:
    """A valid workbook plus one part that inflates to `inflated_mb` MB from about a thousandth of that."""
    base = xlsx_bytes({"Cases": [["Question", "Expected answer"], ["Hi?", "Hello"]]})
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            target.writestr(item, source.read(item.filename))
        info = zipfile.ZipInfo("xl/media/padding.bin")
        info.compress_type = zipfile.ZIP_DEFLATED
        block = b"\x00" * (1 << 20)
        with target.open(info, "w", force_zip64=True) as bomb:
            bomb._compressor = _RepeatingDeflate(block)  # a real deflate stream, built in milliseconds
            for _ in range(inflated_mb):
                bomb.write(block)
    return out.getvalue()


class _RepeatingDeflate:
    """Deflate for the same block written again and again.

    After a full flush the compressor's state is reset, so every later copy of the block
    compresses to the same bytes: compress it once and repeat them. zipfile still computes
    the real CRC and sizes, so the archive is a genuine 1 GB bomb.
    """

    def __init__(self, block: bytes) -> None:
        import zlib

        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
        self._block = block
        self._packed = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
        self._tail = compressor.flush(zlib.Z_FINISH)

    def compress(self, data: bytes) -> bytes:
        assert data == self._block
        return self._packed

    def flush(self) -> bytes:
        return self._tail


XXE_DOCTYPE = '<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
LAUGHS_DOCTYPE = (
    '<!DOCTYPE x [<!ENTITY lol "lol"><!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    '<!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">'
    '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">'
    '<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">'
    '<!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">'
    '<!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">'
    '<!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">'
    '<!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">'
    '<!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">]>'
)


def entity_xlsx(doctype: str, entity: str) -> bytes:
    """A workbook whose shared strings declare `doctype` and use &entity; in a question cell."""
    base = xlsx_bytes({"Cases": [["Question", "Expected answer"], ["MARKER question?", "MARKER answer"]]})

    def patch(xml: str) -> str:
        xml = re.sub(r"^<\?xml[^>]*\?>", "", xml)
        return '<?xml version="1.0" encoding="UTF-8"?>' + doctype + xml.replace("MARKER", f"&{entity};", 1)

    # Inline the strings in the sheet so the entity sits in the part every reader must parse.
    return rewrite_zip(base, {"xl/worksheets/sheet1.xml": patch, "xl/sharedStrings.xml": patch})


def entity_docx(doctype: str, entity: str) -> bytes:
    base = docx_bytes([[["Question", "Expected answer"], ["MARKER question?", "MARKER answer"]], "MARKER prose"])

    def patch(xml: str) -> str:
        xml = re.sub(r"^<\?xml[^>]*\?>\s*", "", xml)
        return (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n' + doctype + xml.replace("MARKER", f"&{entity};")
        )

    return rewrite_zip(base, {"word/document.xml": patch})


def rewrite_zip(data: bytes, patches: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            content = source.read(item.filename)
            if item.filename in patches:
                content = patches[item.filename](content.decode("utf-8")).encode("utf-8")
            target.writestr(item.filename, content)
    return out.getvalue()


def _zip_names(data: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.namelist()
