"""Spreadsheets and tables become cases without a model, keeping sheet/row provenance."""

import pytest

from tests.datasets import files
from tests.datasets.extraction_helpers import case_rows, extract, media_root  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Tables must work with no model configured at all."""


def test_multi_sheet_xlsx_finds_the_header_on_row_3_by_synonyms(agent):
    data = files.xlsx_bytes(
        {
            "Cover": [["Acme support bot: test plan"], ["Owner: QA team"]],
            "Billing": [
                ["Billing cases"],
                [],
                ["Case ID", "Prompt", "Ideal Answer", "Tags"],
                ["B-1", "How long is the refund window?", "30 days from purchase.", "billing, refunds"],
                ["B-2", "Can I pay by invoice?", "Yes, on the Business plan.", ""],
            ],
            "Support": [
                ["Scenario", "Expected Output"],
                ["When is support open?", "Weekdays 9-17 CET."],
            ],
        }
    )

    dataset = extract(agent, "plan.xlsx", data)

    assert dataset.status == "ready", dataset.failure_reason
    assert case_rows(dataset) == [
        ("How long is the refund window?", "30 days from purchase.", "Billing row 4"),
        ("Can I pay by invoice?", "Yes, on the Business plan.", "Billing row 5"),
        ("When is support open?", "Weekdays 9-17 CET.", "Support row 2"),
    ]
    first = dataset.cases.order_by("position").first()
    assert first.case_id == "B-1"
    assert first.tags == ["billing", "refunds"]
    assert first.source_file == "plan.xlsx"
    assert first.source_document.original_name == "plan.xlsx"
    assert not first.documents.exists()
    assert dataset.notice == ""
    assert "Billing cases" in dataset.documents.get().text


def test_merged_cells_and_cached_formula_values_are_read_as_the_user_sees_them(agent):
    data = files.xlsx_bytes(
        {
            "Cases": [
                ["Question", "Expected answer"],
                ["Refund after 10 days?", "Yes, within 30 days."],
                ["Refund after 20 days?", None],
                ["Shipping time?", '=CONCAT("3-5 ","days")'],
            ]
        },
        merges={"Cases": ["B2:B3"]},
    )
    data = files.with_cached_values(data, {"B4": "3-5 days"})

    dataset = extract(agent, "merged.xlsx", data)

    assert [(q, a) for q, a, _ in case_rows(dataset)] == [
        ("Refund after 10 days?", "Yes, within 30 days."),
        ("Refund after 20 days?", "Yes, within 30 days."),
        ("Shipping time?", "3-5 days"),
    ]


def test_old_binary_xls_with_merged_cells(agent):
    data = files.xls_bytes(
        {
            "Plan": [
                ["Support bot test plan"],
                ["Query", "Expected Answer"],
                ["Opening hours?", "9-17"],
                ["Weekend?", ""],
                ["Refunds?", 30.0],
            ]
        },
        merges={"Plan": [(2, 3, 1, 1)]},
    )

    dataset = extract(agent, "legacy.xls", data)

    assert dataset.status == "ready", dataset.failure_reason
    assert case_rows(dataset) == [
        ("Opening hours?", "9-17", "Plan row 3"),
        ("Weekend?", "9-17", "Plan row 4"),
        ("Refunds?", "30", "Plan row 5"),
    ]


def test_csv_with_byte_order_mark_and_semicolons(agent):
    data = files.csv_bytes(
        [
            ["Frage / Question", "Answer"],
            ["Où est ma commande ?", "Dans « Mes commandes »; suivi inclus."],
            ["Größe?", "M"],
        ],
        delimiter=";",
        bom=True,
    )

    dataset = extract(agent, "cases.csv", data)

    assert case_rows(dataset) == [
        ("Où est ma commande ?", "Dans « Mes commandes »; suivi inclus.", "row 2"),
        ("Größe?", "M", "row 3"),
    ]


def test_markdown_table(agent):
    text = (
        "# Support bot cases\n\nSome intro text.\n\n"
        "| ID | Question | Expected answer |\n|---|:---|---|\n"
        "| 1 | Do you ship to Norway? | Yes, in 5-7 days. |\n| 2 | Is there a \\| pipe? | One<br>two |\n\nAfter.\n"
    )

    dataset = extract(agent, "cases.md", text.encode())

    assert case_rows(dataset) == [
        ("Do you ship to Norway?", "Yes, in 5-7 days.", "line 7"),
        ("Is there a | pipe?", "One\ntwo", "line 8"),
    ]


def test_docx_table(agent):
    data = files.docx_bytes(
        [
            "Test plan for the support bot.",
            [
                ["Test question", "Expected response"],
                ["How do I reset my password?", "Use 'Forgot password' on the login page."],
            ],
            "Second table:",
            [["Input", "Output"], ["Cancel my plan", "Settings > Billing > Cancel."]],
        ]
    )

    dataset = extract(agent, "plan.docx", data)

    assert case_rows(dataset) == [
        ("How do I reset my password?", "Use 'Forgot password' on the login page.", "Table 1 row 2"),
        ("Cancel my plan", "Settings > Billing > Cancel.", "Table 2 row 2"),
    ]


def test_stray_cell_at_the_last_cell_of_the_sheet_still_gives_three_cases(agent):
    data = files.stray_cell_xlsx([["Question", "Answer"], ["One?", "1"], ["Two?", "2"], ["Three?", "3"]])

    dataset = extract(agent, "stray.xlsx", data)

    assert dataset.status == "ready"
    assert dataset.cases.count() == 3


@pytest.mark.parametrize("rows, kept, notice_has", [(600, 500, "600"), (501, 500, "501"), (500, 500, None)])
def test_at_most_500_cases_are_kept_and_the_page_says_so(agent, rows, kept, notice_has):
    data = files.xlsx_bytes({"Cases": [["Question", "Expected answer"], *files.qa_rows(rows)]})

    dataset = extract(agent, "big.xlsx", data)

    assert dataset.status == "ready"
    assert dataset.cases.count() == kept
    assert dataset.cases.order_by("position").last().question.startswith("Question number 500:")
    if notice_has:
        assert notice_has in dataset.notice and "500" in dataset.notice
    else:
        assert dataset.notice == ""


def test_repeated_case_ids_across_sheets_are_made_unique_and_pasted_rows_dropped(agent):
    sheet = [["ID", "Question", "Answer"], ["1", "Alpha?", "a"], ["2", "Beta?", "b"], ["2", "Beta?", "b"]]
    data = files.xlsx_bytes({"One": sheet, "Two": [["ID", "Question", "Answer"], ["1", "Gamma?", "c"]]})

    dataset = extract(agent, "ids.xlsx", data)

    assert list(dataset.cases.order_by("position").values_list("case_id", "question")) == [
        ("1", "Alpha?"),
        ("2", "Beta?"),
        ("1-2", "Gamma?"),
    ]


def test_a_sheet_without_a_question_column_fails_with_a_reason_and_no_cases(agent):
    data = files.xlsx_bytes({"Budget": [["Item", "Cost"], ["Laptops", 12000], ["Chairs", 800]]})

    dataset = extract(agent, "budget.xlsx", data)

    assert dataset.status == "failed"
    assert "no question column" in dataset.failure_reason
    assert dataset.cases.count() == 0
