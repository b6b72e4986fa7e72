"""The attachment writers make real files that Office libraries open again."""

import io

import docx
import openpyxl
from pypdf import PdfReader

from datasets.generation.writers import (
    DocumentSpec,
    FormalSpec,
    Party,
    TableSpec,
    document_text,
    safe_filename,
    write_document,
)

BUDGET = TableSpec(
    columns=["Month", "Category", "Budget", "Actual"],
    rows=[["January", "Marketing", 1200, "1350.50"], ["February", "Support", "900", "00123"]],
)
INVOICE = FormalSpec(
    kind="invoice",
    parties=[Party("From", "Acme Cloud Ltd", ["1 Main Street", "Dublin"]), Party("Bill to", "Globex", ["2 Side St"])],
    fields=[("Invoice number", "INV-042"), ("Due date", "2025-01-31")],
    line_items=TableSpec(["Description", "Qty", "Unit price", "Amount"], [["Pro plan", 2, "€49.00", "€98.00"]]),
    totals=[("Subtotal", "€98.00"), ("VAT 23%", "€22.54"), ("Total", "€120.54")],
    notes=["Payment within 30 days."],
)


def test_a_table_becomes_an_xlsx_with_a_bold_frozen_header_and_sized_columns():
    written = write_document(DocumentSpec("Q1 budget", context="Excel budget sheet", table=BUDGET))

    assert written.file_type == "xlsx"
    assert written.filename == "Q1 budget.xlsx"
    sheet = openpyxl.load_workbook(io.BytesIO(written.content)).active
    assert sheet.title == "Q1 budget"
    assert [[c.value for c in row] for row in sheet.iter_rows()] == [
        ["Month", "Category", "Budget", "Actual"],
        ["January", "Marketing", 1200, 1350.5],
        ["February", "Support", 900, "00123"],  # a leading zero is an id, not a number
    ]
    assert all(cell.font.b for cell in sheet[1])
    assert sheet.freeze_panes == "A2"
    assert sheet.column_dimensions["B"].width >= len("Marketing")


def test_model_text_that_looks_like_a_formula_stays_text_in_the_xlsx():
    table = TableSpec(["Name", "Note"], [['=HYPERLINK("http://evil")', "+1 call me"]])
    written = write_document(DocumentSpec("Contacts", table=table))

    sheet = openpyxl.load_workbook(io.BytesIO(written.content)).active
    assert sheet["A2"].value == '=HYPERLINK("http://evil")'
    assert sheet["A2"].data_type == "s"
    assert b"<f>" not in _xlsx_sheet_xml(written.content)


def test_prose_becomes_a_docx_with_a_title_headings_paragraphs_and_its_table():
    spec = DocumentSpec(
        "Remote work policy",
        paragraphs=["## 1. Scope", "This policy applies to <all> employees & contractors.", "Signed, HR"],
        table=BUDGET,
    )
    written = write_document(spec)

    assert written.file_type == "docx"
    document = docx.Document(io.BytesIO(written.content))
    styled = [(p.style.name, p.text) for p in document.paragraphs]
    assert styled[:4] == [
        ("Title", "Remote work policy"),
        ("Heading 2", "1. Scope"),
        ("Normal", "This policy applies to <all> employees & contractors."),
        ("Normal", "Signed, HR"),
    ]
    table = document.tables[0]
    assert [c.text for c in table.rows[0].cells] == ["Month", "Category", "Budget", "Actual"]
    assert [c.text for c in table.rows[1].cells] == ["January", "Marketing", "1200", "1350.50"]
    assert table.rows[0].cells[0].paragraphs[0].runs[0].bold


def test_a_table_with_prose_goes_to_xlsx_only_when_the_hint_asks_for_a_spreadsheet():
    spec = DocumentSpec("Budget", format_hint="Excel spreadsheet", paragraphs=["Figures in EUR."], table=BUDGET)
    written = write_document(spec)

    assert written.file_type == "xlsx"
    workbook = openpyxl.load_workbook(io.BytesIO(written.content))
    assert workbook.sheetnames == ["Budget", "Notes"]
    assert workbook["Notes"]["A1"].value == "Figures in EUR."


def test_an_invoice_becomes_a_pdf_whose_text_reads_back():
    written = write_document(DocumentSpec("Invoice INV-042", formal=INVOICE))

    assert written.file_type == "pdf"
    assert written.content.startswith(b"%PDF-")
    text = PdfReader(io.BytesIO(written.content)).pages[0].extract_text()
    for expected in ("INVOICE", "Acme Cloud Ltd", "Bill to", "INV-042", "Pro plan", "€98.00", "Total", "€120.54"):
        assert expected in text
    assert "Payment within 30 days." in text


def test_a_long_formal_document_flows_onto_more_pages_and_repeats_the_header():
    rows = [[f"2025-03-{day:02d}", f"Card payment {day}", f"{day * 3}.00"] for day in range(1, 29)] * 3
    formal = FormalSpec("statement", line_items=TableSpec(["Date", "Description", "Amount"], rows))
    written = write_document(DocumentSpec("Statement March", formal=formal))

    reader = PdfReader(io.BytesIO(written.content))
    assert len(reader.pages) >= 2
    assert "Description" in reader.pages[1].extract_text()


def test_pdf_text_escapes_markup_and_survives_characters_the_font_lacks():
    formal = FormalSpec("receipt", fields=[("Item", "<b>bold</b> & co 中文")])
    written = write_document(DocumentSpec("Receipt", formal=formal))

    text = PdfReader(io.BytesIO(written.content)).pages[0].extract_text()
    assert "<b>bold</b> & co" in text


def test_document_text_is_the_content_in_reading_order():
    text = document_text(DocumentSpec("Invoice INV-042", formal=INVOICE))

    assert text.index("Invoice INV-042") < text.index("From: Acme Cloud Ltd") < text.index("Pro plan")
    assert "Description | Qty | Unit price | Amount" in text
    assert "Total: €120.54" in text


def test_file_names_come_from_the_title_and_never_make_a_path():
    assert safe_filename("../../etc/passwd") == "etc passwd"
    assert safe_filename("Q1: budget / plan?") == "Q1 budget plan"
    assert safe_filename("...") == "Document"
    assert len(safe_filename("x" * 300)) == 80


def test_control_characters_from_the_model_do_not_break_the_files():
    table = TableSpec(["A\x00", "B"], [["bell\x07", "ok"]])
    xlsx = write_document(DocumentSpec("Bad\x0bchars", table=table))
    docx_file = write_document(DocumentSpec("Memo", paragraphs=["line\x0c one"]))

    assert openpyxl.load_workbook(io.BytesIO(xlsx.content)).active["A2"].value == "bell"
    assert docx.Document(io.BytesIO(docx_file.content)).paragraphs[1].text == "line one"


def _xlsx_sheet_xml(content: bytes) -> bytes:
    import zipfile

    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        return archive.read("xl/worksheets/sheet1.xml")
