"""File checks that run before any work: type by content, archive sanity, safe display names."""

import io

import pytest

from datasets.extraction.errors import FileRejected
from datasets.extraction.tables import Table, header_field, plan_table, split_tables, table_cases
from datasets.extraction.validation import sanitize_filename, validate_file
from tests.datasets import files


def check(name: str, data: bytes, max_bytes: int = 10_000_000):
    return validate_file(name, io.BytesIO(data), len(data), max_bytes=max_bytes)


@pytest.mark.parametrize(
    "name, data, file_type",
    [
        ("a.pdf", files.pdf_bytes([["x"]]), "pdf"),
        ("a.xlsx", files.xlsx_bytes({"S": [["Question"]]}), "xlsx"),
        ("a.xls", files.xls_bytes({"S": [["Question"]]}), "xls"),
        ("really-xlsx.xls", files.xlsx_bytes({"S": [["Question"]]}), "xlsx"),  # believe the content
        ("a.docx", files.docx_bytes(["x"]), "docx"),
        ("a.csv", b"Question\nHi?\n", "csv"),
        ("A.MARKDOWN", b"# Hi", "md"),
    ],
)
def test_real_files_are_accepted_with_their_type_and_hash(name, data, file_type):
    checked = check(name, data)

    assert checked.file_type == file_type
    assert checked.size == len(data)
    assert len(checked.sha256) == 64


def test_a_pdf_header_after_some_junk_is_still_a_pdf():
    assert check("a.pdf", b"\xef\xbb\xbf\n" + files.pdf_bytes([["x"]])).file_type == "pdf"


def test_size_limit_is_in_decimal_megabytes():
    assert check("a.md", b"x" * 1000, max_bytes=1000).size == 1000
    with pytest.raises(FileRejected, match=r"The file is 0\.0 MB; the limit is 0\.001 MB\."):
        check("a.md", b"x" * 1001, max_bytes=1000)


def test_text_files_with_binary_content_are_refused():
    with pytest.raises(FileRejected, match="binary data"):
        check("a.csv", b"Question\n\x00\x01\x02")


@pytest.mark.parametrize(
    "name, expected",
    [
        ("../../etc/passwd.md", "passwd.md"),
        ("..\\..\\boot.ini.csv", "boot.ini.csv"),
        ("nul\x00byte.md", "nulbyte.md"),
        ("crlf\r\nSet-Cookie: x.md", "crlfSet-Cookie_ x.md"),
        ("CON.md", "document-CON.md"),
        ("   .md", "document.md"),
        ("<b>plan</b>.xlsx", "b_.xlsx"),  # "/" is a path separator, whatever the brackets
        ("Résumé Q3.pdf", "Résumé Q3.pdf"),
    ],
)
def test_display_names_are_sanitised(name, expected):
    assert sanitize_filename(name) == expected


def test_long_names_keep_their_extension():
    name = sanitize_filename("a" * 300 + ".xlsx")

    assert len(name) == 120 and name.endswith(".xlsx")


@pytest.mark.parametrize(
    "header, field",
    [
        ("Question", "question"),
        ("PROMPT:", "question"),
        ("User input", "question"),
        ("Scenario (what happens)", "question"),
        ("Expected Answer", "expected_answer"),
        ("Ideal answer", "expected_answer"),
        ("Expected output", "expected_answer"),
        ("Answer", "expected_answer"),
        ("Expected answer from the bot", "expected_answer"),
        ("Case ID", "case_id"),
        ("Tags", "tags"),
        ("Notes", None),
        ("Question 3: how do I reset my password?", None),
    ],
)
def test_header_synonyms(header, field):
    assert (header_field(header) or (None,))[0] == field


def test_a_sheet_can_hold_two_tables_one_under_the_other():
    table = Table(
        label="S",
        rows=[
            (1, {1: "Question", 2: "Answer"}),
            (2, {1: "A?", 2: "a"}),
            (4, {2: "Prompt", 3: "Ideal answer"}),
            (5, {2: "B?", 3: "b"}),
        ],
    )

    cases = [case for part in split_tables(table) for case in table_cases(part, plan_table(part))]

    assert [(c["question"], c["expected_answer"], c["location"]) for c in cases] == [
        ("A?", "a", "S row 2"),
        ("B?", "b", "S row 5"),
    ]
