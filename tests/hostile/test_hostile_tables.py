"""Hostile test plans that read without error but could be read wrong (issue 48): a table
must give exactly one case per row the user wrote, and every step that drops, cuts,
joins, pads or guesses is a warning naming the file and the row (or line, page, cell).

The files are built here; each test says what a QA person must see.
"""

from __future__ import annotations

import pytest

from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401

pytestmark = pytest.mark.django_db

HEADER = "| # | Question | Expected answer |\n|---|---|---|\n"


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Tables need no model."""


def _rows(first: int, last: int) -> str:
    return "".join(f"| {n} | Question number {n}? | Answer {n} |\n" for n in range(first, last + 1))


def _warnings(dataset) -> list[str]:
    return [f"{item['where']}: {item['message']}" for item in dataset.warnings]


def _questions(dataset) -> list[str]:
    return list(dataset.cases.order_by("position").values_list("question", flat=True))


# ---- Markdown -------------------------------------------------------------------------


def test_separator_lines_inside_a_markdown_table_are_not_cases(agent):
    separators = ("|---|---|---|\n", "| :-- | --- | --: |\n")
    text = "# Plan\n\n" + HEADER + _rows(1, 5) + separators[0] + _rows(6, 10) + separators[1] + _rows(11, 15)

    dataset = extract(agent, "plan.md", text.encode())

    assert _questions(dataset) == [f"Question number {n}?" for n in range(1, 16)]


def test_a_blank_line_inside_a_markdown_table_does_not_lose_the_rows_after_it(agent):
    text = "# Plan\n\n" + HEADER + _rows(1, 5) + "\n" + _rows(6, 15)

    dataset = extract(agent, "plan.md", text.encode())

    assert _questions(dataset) == [f"Question number {n}?" for n in range(1, 16)]
    assert any(w.startswith("plan.md, line 10: ") and "blank line" in w for w in _warnings(dataset)), _warnings(dataset)


def test_a_markdown_row_wrapped_over_two_lines_is_one_case(agent):
    wrapped = "| 5 | Question number 5, which is long and\nwraps onto a second line? | Answer 5 |\n"
    text = "# Plan\n\n" + HEADER + _rows(1, 4) + wrapped + _rows(6, 15)

    dataset = extract(agent, "plan.md", text.encode())

    questions = _questions(dataset)
    assert len(questions) == 15, questions
    assert questions[4] == "Question number 5, which is long and\nwraps onto a second line?"
    assert dataset.cases.order_by("position")[4].expected_answer == "Answer 5"
    assert any(w.startswith("plan.md, line 9: ") and "lines 9-10" in w for w in _warnings(dataset)), _warnings(dataset)


def test_table_rows_under_no_header_are_named_not_dropped_silently(agent):
    text = "# Plan\n\n" + HEADER + _rows(1, 15) + "\nSome prose in between.\n\n| 16 | Orphan row? | Yes |\n"

    dataset = extract(agent, "plan.md", text.encode())

    assert len(_questions(dataset)) == 15
    assert any(w.startswith("plan.md, line 23: ") and "no header row" in w for w in _warnings(dataset)), _warnings(
        dataset
    )


def test_a_markdown_row_with_more_cells_than_the_header_keeps_them_and_says_so(agent):
    text = "# Plan\n\n" + HEADER + _rows(1, 2) + "| 3 | Is `a | b` fine? | yes |\n"

    dataset = extract(agent, "plan.md", text.encode())

    case = dataset.cases.order_by("position")[2]
    assert case.question == "Is `a"
    assert case.metadata["Column D"] == "yes"
    assert any("4 cells but the header has 3" in w and "Column D" in w for w in case.import_warnings)
    assert any(w.startswith("plan.md, line 7: ") for w in _warnings(dataset))


# ---- spreadsheets ---------------------------------------------------------------------


def test_an_xlsx_formula_with_a_saved_value_imports_the_value_and_says_it_was_a_formula(agent):
    rows = [["Question", "Expected answer"], ["Shipping time?", '=CONCAT("3-5 ","days")'], ["Plain?", "Yes"]]
    data = files.with_cached_values(files.xlsx_bytes({"Cases": rows}), {"B2": "3-5 days"})

    dataset = extract(agent, "formulas.xlsx", data)

    case = dataset.cases.order_by("position").first()
    assert case.expected_answer == "3-5 days"
    (warning,) = case.import_warnings
    assert "“Expected answer” cell is a formula" in warning and 'CONCAT("3-5 ","days")' in warning
    assert "saved value" in warning
    assert any(w.startswith("formulas.xlsx, Cases row 2: ") and "formula" in w for w in _warnings(dataset))


def test_an_xlsx_formula_with_no_saved_value_in_any_column_is_named(agent):
    rows = [["Question", "Expected answer", "Owner"], ["Refunds?", "30 days", '=UPPER("qa")'], ["Plain?", "Yes", "qa"]]

    dataset = extract(agent, "formulas.xlsx", files.xlsx_bytes({"Cases": rows}))

    case = dataset.cases.order_by("position").first()
    assert any("“Owner” cell is a formula with no saved value" in w for w in case.import_warnings)
    assert any(w.startswith("formulas.xlsx, Cases row 2: ") for w in _warnings(dataset))


def test_a_question_that_is_a_formula_with_no_saved_value_says_why_the_row_gave_no_case(agent):
    rows = [["Question", "Expected answer"], ['=CONCAT("How ","long?")', "3 days"], ["Plain?", "Yes"]]

    dataset = extract(agent, "formulas.xlsx", files.xlsx_bytes({"Cases": rows}))

    assert dataset.cases.count() == 1
    assert any(
        w.startswith("formulas.xlsx, Cases row 2: ") and "formula with no saved value" in w for w in _warnings(dataset)
    ), _warnings(dataset)


def test_merged_cells_in_a_kept_column_are_named_with_their_range(agent):
    rows = [
        ["Section", "Question", "Expected answer"],
        ["Billing", "Refund after 10 days?", "Yes"],
        [None, "Refund after 40 days?", "No"],
        [None, "Invoice copy?", "From Billing"],
    ]
    data = files.xlsx_bytes({"Cases": rows}, merges={"Cases": ["A2:A4"]})

    dataset = extract(agent, "merged.xlsx", data)

    cases = list(dataset.cases.order_by("position"))
    assert [case.metadata["Section"] for case in cases] == ["Billing"] * 3
    assert cases[0].import_warnings == []
    assert any("merged cells A2:A4" in w and "“Section”" in w for w in cases[2].import_warnings)
    assert any(w.startswith("merged.xlsx, Cases row 3, Cases row 4: ") and "A2:A4" in w for w in _warnings(dataset)), (
        _warnings(dataset)
    )


def test_merged_cells_in_an_xls_workbook_are_named(agent):
    rows = [
        ["Question", "Expected answer"],
        ["Refund after 10 days?", "Yes, within 30 days."],
        ["Refund after 20?", ""],
    ]
    data = files.xls_bytes({"Cases": rows}, merges={"Cases": [(1, 2, 1, 1)]})

    dataset = extract(agent, "merged.xls", data)

    case = dataset.cases.order_by("position")[1]
    assert case.expected_answer == "Yes, within 30 days."
    assert any("merged cells B2:B3" in w for w in case.import_warnings)


# ---- Word and PDF ---------------------------------------------------------------------


def _docx_with_merges() -> bytes:
    import io

    import docx

    document = docx.Document()
    table = document.add_table(rows=4, cols=3)
    for r, row in enumerate(
        [
            ["Section", "Question", "Expected answer"],
            ["Billing", "Refund after 10 days?", "Yes"],
            ["", "Refund after 40 days?", "No"],
            ["Login", "Reset my password, please: the whole row is one merged cell", ""],
        ]
    ):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    table.cell(1, 0).merge(table.cell(2, 0)).text = "Billing"  # vertical: Section over rows 2-3
    table.cell(3, 1).merge(table.cell(3, 2))  # horizontal: the question spans the expected answer
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_merged_cells_in_a_word_table_are_named(agent):
    dataset = extract(agent, "plan.docx", _docx_with_merges())

    cases = list(dataset.cases.order_by("position"))
    assert [case.metadata.get("Section") for case in cases] == ["Billing", "Billing", "Login"]
    assert cases[0].import_warnings == []
    assert any("“Section” value comes from the merged cells from row" in w for w in cases[1].import_warnings)
    assert any("“Expected answer” value comes from the merged cells from row" in w for w in cases[2].import_warnings)
    assert any(w.startswith("plan.docx, Table 1 row 3: ") for w in _warnings(dataset)), _warnings(dataset)


def test_pdf_pages_with_no_text_are_named(agent):
    lines = ["Question: How long is the refund window?", "Expected answer: 30 days from purchase."]
    data = files.pdf_bytes([lines, [], lines[:1] + ["Expected answer: 31 days."], []])

    dataset = extract(agent, "plan.pdf", data)

    assert dataset.status == "ready", dataset.failure_reason
    assert any(w.startswith("plan.pdf, pages 2, 4: ") and "no text" in w for w in _warnings(dataset)), _warnings(
        dataset
    )


def test_a_table_in_a_markdown_code_block_is_an_example_not_cases(agent):
    example = "Write each case as:\n\n```markdown\n" + HEADER + "| 0 | Example? | Ex |\n```\n\n"
    text = "# Plan\n\n" + example + HEADER + _rows(1, 15)

    dataset = extract(agent, "plan.md", text.encode())

    assert _questions(dataset) == [f"Question number {n}?" for n in range(1, 16)]
    assert any(w.startswith("plan.md, lines 5-9: ") and "code block" in w for w in _warnings(dataset)), _warnings(
        dataset
    )


def test_a_code_block_never_closed_does_not_hide_the_table_after_it(agent):
    text = "# Plan\n\n```\nan example, never closed\n\n" + HEADER + _rows(1, 15)

    dataset = extract(agent, "plan.md", text.encode())

    assert len(_questions(dataset)) == 15
    never_closed = "plan.md, line 3: A code block opened on line 3 is never closed"
    assert any(w.startswith(never_closed) for w in _warnings(dataset))


def test_hidden_sheets_rows_and_columns_are_named(agent):
    import io

    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Cases"
    for row in [["Question", "Expected answer", "Owner"], ["A?", "a", "qa"], ["B?", "b", "qa"], ["C?", "c", "qa"]]:
        sheet.append(row)
    sheet.row_dimensions[3].hidden = True
    sheet.column_dimensions["C"].hidden = True
    hidden = workbook.create_sheet("Old cases")
    hidden.append(["Question", "Expected answer"])
    hidden.append(["Retired?", "yes"])
    hidden.sheet_state = "hidden"
    out = io.BytesIO()
    workbook.save(out)

    dataset = extract(agent, "hidden.xlsx", out.getvalue())

    assert dataset.cases.count() == 4
    warnings = _warnings(dataset)
    assert any(w.startswith("hidden.xlsx, Cases row 3: This row is hidden") for w in warnings), warnings
    assert any(w.startswith("hidden.xlsx, Cases: Hidden column C") for w in warnings), warnings
    assert any(w.startswith("hidden.xlsx, sheet Old cases: This sheet is hidden") for w in warnings), warnings


def test_a_csv_over_the_row_limit_says_where_it_was_cut(monkeypatch):
    from datasets.extraction import text_files

    monkeypatch.setattr(text_files, "MAX_ROWS_PER_FILE", 3)
    warnings: list[dict[str, str]] = []

    table = text_files.csv_table("question\nOne?\nTwo?\nThree?\nFour?\n", warnings, [])

    assert len(table.rows) == 3
    assert warnings == [
        {
            "where": "row 4",
            "message": "The file has more than 3 rows; only the first 3 were read. Split it into smaller files.",
        }
    ]


def test_a_spreadsheet_error_value_is_named_with_its_cell(agent):
    rows = [["Question", "Expected answer"], ["Price?", "=1/0"], ["Plain?", "Yes"]]
    data = files.with_cached_values(files.xlsx_bytes({"Cases": rows}), {"B2": "#DIV/0!"})
    data = files.rewrite_zip(
        data, {"xl/worksheets/sheet1.xml": lambda xml: xml.replace('r="B2" t="str"', 'r="B2" t="e"')}
    )

    dataset = extract(agent, "errors.xlsx", data)

    case = dataset.cases.order_by("position").first()
    assert case.expected_answer == "#DIV/0!"
    assert "The cell B2 holds the spreadsheet error #DIV/0!; it was read as that text." in case.import_warnings
    assert any(w.startswith("errors.xlsx, Cases row 2: The cell B2 holds") for w in _warnings(dataset))


def test_xls_error_cells_hidden_rows_and_hidden_sheets_are_named(agent):
    import io

    import xlwt

    workbook = xlwt.Workbook()
    sheet = workbook.add_sheet("Cases")
    for r, row in enumerate([["Question", "Expected answer"], ["Price?", None], ["Hidden?", "h"], ["Plain?", "p"]]):
        for c, value in enumerate(row):
            if value is not None:
                sheet.write(r, c, value)
    sheet.row(1).set_cell_error(1, "#DIV/0!")
    sheet.row(2).hidden = True
    old = workbook.add_sheet("Old cases")
    old.write(0, 0, "Question")
    old.write(1, 0, "Retired?")
    old.visibility = 1
    out = io.BytesIO()
    workbook.save(out)

    dataset = extract(agent, "plan.xls", out.getvalue())

    warnings = _warnings(dataset)
    assert any(w.startswith("plan.xls, Cases row 2: The cell B2 holds the spreadsheet error #DIV/0!") for w in warnings)
    assert any(w.startswith("plan.xls, Cases row 3: This row is hidden") for w in warnings), warnings
    assert any(w.startswith("plan.xls, sheet Old cases: This sheet is hidden") for w in warnings), warnings


def test_markdown_rows_without_their_leading_pipe_stay_in_the_table(agent):
    rows = "".join(f"{n} | Question number {n}? | Answer {n} |\n" for n in range(2, 16))
    text = "# Plan\n\n" + HEADER + _rows(1, 1) + rows + "\nSee you | later.\n"

    dataset = extract(agent, "plan.md", text.encode())

    assert _questions(dataset) == [f"Question number {n}?" for n in range(1, 16)]


def test_a_word_table_split_over_pages_names_the_rows_it_could_not_read(agent):
    first = [["Question", "Expected answer"], *files.qa_rows(3)]
    rest = files.qa_rows(2, start=4)  # the table goes on after a page break, without its header

    dataset = extract(agent, "plan.docx", files.docx_bytes([first, "", rest]))

    assert dataset.cases.count() == 3
    assert any(
        w.startswith("plan.docx, Table 2 row 1: 1 row(s) under this table's first row") for w in _warnings(dataset)
    )
