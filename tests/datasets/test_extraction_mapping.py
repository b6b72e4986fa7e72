"""The mapping step: the right question column without help, skipped sheets with a reason,
a changed mapping honoured, unmapped columns kept as metadata, and the 500-case choice."""

import pytest
from django.core.exceptions import ValidationError

from datasets.extraction.mapping import dataset_mapping_confirm, dataset_upload_cancel, mapping_from_json
from datasets.models import Dataset
from tests.datasets import files
from tests.datasets.extraction_helpers import confirm_mapping, extract, media_root  # noqa: F401

pytestmark = pytest.mark.django_db

PLAN_HEADER = ["ID", "Scenario", "Priority", "Question", "Expected", "Notes"]
PLAN_ROWS = [
    ["TC-1", "Refunds", "High", "Can I get a refund 40 days after purchase?", "No, only within 30 days.", "policy 2"],
    ["TC-2", "Refunds", "Low", "How do I ask for a refund?", "Use the form under Billing.", ""],
    ["TC-3", "Support hours", "High", "When is phone support open?", "Weekdays 9-17 CET.", "check holidays"],
]


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Tables are mapped with no model configured."""


def _plan_workbook() -> bytes:
    return files.xlsx_bytes(
        {
            "Test plan": [
                ["Acme support bot: regression plan"],
                ["Owner: QA team", "Version 3"],
                [],
                PLAN_HEADER,
                *PLAN_ROWS,
            ],
            "Glossary": [["Term", "Definition"], ["SLA", "Service level agreement"], ["CET", "Central European Time"]],
        }
    )


def test_a_plan_with_scenario_left_of_question_maps_question_without_help(agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)

    assert dataset.status == Dataset.Status.REVIEW
    assert dataset.cases.count() == 0  # nothing is created before the user confirms
    plan, glossary = dataset.mapping["tables"]
    assert plan["label"] == "Test plan" and plan["header_row"] == 4
    assert {c["header"]: c["field"] for c in plan["columns"]} == {
        "ID": "case_id",
        "Scenario": "metadata",
        "Priority": "metadata",
        "Question": "question",
        "Expected": "expected_answer",
        "Notes": "metadata",
    }
    assert plan["preview"][0]["row"] == 5
    assert plan["preview"][0]["cells"][3] == "Can I get a refund 40 days after purchase?"
    assert plan["cases"] == 3 and plan["skipped"] == ""
    assert glossary["label"] == "Glossary" and glossary["cases"] == 0
    assert "glossary" in glossary["skipped"].lower() and "Term, Definition" in glossary["skipped"]
    assert dataset.mapping["total"] == 3

    dataset = confirm_mapping(dataset)

    assert dataset.status == Dataset.Status.READY
    cases = list(dataset.cases.order_by("position"))
    assert [(c.case_id, c.question, c.expected_answer) for c in cases] == [
        (row[0], row[3], row[4]) for row in PLAN_ROWS
    ]
    assert cases[0].metadata == {"Scenario": "Refunds", "Priority": "High", "Notes": "policy 2"}
    assert cases[1].metadata == {"Scenario": "Refunds", "Priority": "Low"}
    assert cases[0].source_location == "Test plan row 5"


def test_scenario_wins_over_short_repeated_labels_when_no_header_says_question(agent):
    data = files.csv_bytes(
        [
            ["Title", "Test case", "Expected result"],
            ["Refunds", "A customer asks whether a refund is possible 40 days after buying", "No"],
            ["Refunds", "The customer wants to know how to request a refund", "Billing form"],
            ["Hours", "Someone asks when phone support is open", "9-17"],
        ]
    )

    dataset = extract(agent, "weak.csv", data, confirm=False)

    fields = {c["header"]: c["field"] for c in dataset.mapping["tables"][0]["columns"]}
    assert fields["Test case"] == "question" and fields["Title"] == "metadata"


def test_a_changed_mapping_is_honoured(agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)
    chosen = {
        "tables": {
            "0": {
                "skip": False,
                "columns": {
                    "1": "ignore",
                    "2": "question",
                    "3": "tags",
                    "4": "document_context",
                    "5": "expected_answer",
                    "6": "judge_guideline",
                },
            },
        }
    }

    dataset = confirm_mapping(dataset, chosen)

    first = dataset.cases.order_by("position").first()
    assert first.question == "Refunds"
    assert first.tags == ["High"]
    assert first.document_context == PLAN_ROWS[0][3]
    assert first.judge_guideline == "policy 2"
    assert first.case_id == "" and first.metadata == {}
    assert dataset.mapping["chosen"]["tables"]["0"]["columns"]["2"] == "question"


def test_a_mapping_needs_exactly_one_question_column_per_included_table(agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)
    two = {"tables": {"0": {"skip": False, "columns": {"2": "question", "4": "question"}}}}

    with pytest.raises(ValidationError, match="exactly one column to the question"):
        dataset_mapping_confirm(dataset=dataset, chosen=two, keep_first=True)
    with pytest.raises(ValidationError, match="Every table is skipped"):
        dataset_mapping_confirm(
            dataset=dataset, chosen={"tables": {"0": {"skip": True, "columns": {}}}}, keep_first=True
        )
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.REVIEW


def test_a_skipped_sheet_can_be_included_by_mapping_its_question(agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)
    chosen = mapping_from_json(
        tables=dataset.mapping["tables"], raw={"Glossary": {"Term": "question", "Definition": "expected"}}
    )

    dataset = confirm_mapping(dataset, chosen)

    assert dataset.cases.count() == 5
    assert dataset.cases.filter(question="SLA", expected_answer="Service level agreement").exists()


def test_mapping_json_from_the_command_line_or_api(agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)
    tables = dataset.mapping["tables"]

    flat = mapping_from_json(tables=tables, raw={"Scenario": "question"})
    assert flat["tables"]["0"]["columns"]["2"] == "question"
    assert flat["tables"]["0"]["columns"]["4"] == "metadata"  # the suggested question column steps aside
    assert flat["tables"]["1"]["skip"] is True

    by_letter = mapping_from_json(tables=tables, raw={"Test plan": {"B": "question", "D": "ignore"}})
    assert by_letter["tables"]["0"]["columns"]["2"] == "question"

    with pytest.raises(ValidationError, match="No sheet or table is named “Cases”"):
        mapping_from_json(tables=tables, raw={"Cases": {"Question": "question"}})
    with pytest.raises(ValidationError, match="unknown field “answerr”"):
        mapping_from_json(tables=tables, raw={"Test plan": {"Expected": "answerr"}})


@pytest.mark.parametrize("rows", [600, 501])
def test_over_the_limit_the_user_keeps_the_first_500_or_cancels(agent, rows):
    data = files.xlsx_bytes({"Cases": [["Question", "Expected answer"], *files.qa_rows(rows)]})
    dataset = extract(agent, "big.xlsx", data, confirm=False)

    assert dataset.status == Dataset.Status.REVIEW
    assert dataset.mapping["total"] == rows and dataset.mapping["limit"] == 500
    with pytest.raises(ValidationError, match=f"The file has {rows} test cases"):
        dataset_mapping_confirm(dataset=dataset, chosen=None, keep_first=False)

    dataset = confirm_mapping(dataset, keep_first=True)

    assert dataset.cases.count() == 500
    assert str(rows) in dataset.notice and "500" in dataset.notice


def test_cancelling_the_mapping_step_deletes_the_upload(agent, media_root):  # noqa: F811
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)

    dataset_upload_cancel(dataset=dataset)

    assert not Dataset.objects.filter(pk=dataset.pk).exists()


def test_a_lone_title_cell_above_the_header_is_not_taken_for_the_header(agent):
    data = files.xlsx_bytes({"Plan": [["Title"], [], ["Question", "Expected answer"], ["One?", "1"], ["Two?", "2"]]})

    dataset = extract(agent, "plan.xlsx", data, confirm=False)

    (table,) = dataset.mapping["tables"]
    assert table["header_row"] == 3 and table["cases"] == 2


def test_tool_tables_and_change_logs_are_skipped_with_the_reason_even_with_an_input_column(agent):
    data = files.xlsx_bytes(
        {
            "Cases": [["Question", "Expected answer"], ["Where is my order?", "In Orders."]],
            "Tools": [["Tool", "Input", "Parameters"], ["lookup_order", "order id", '{"id": "string"}']],
            "Change log": [["Version", "Date", "Change"], ["3", "2026-11-01", "Added refunds"]],
            "Functions list": [["Function", "Prompt", "Arguments"], ["refund", "Refund an order", "order_id"]],
        }
    )

    dataset = extract(agent, "plan.xlsx", data, confirm=False)

    cases, tools, changes, functions = dataset.mapping["tables"]
    assert cases["skipped"] == ""
    assert "a tools sheet, not test cases" in tools["skipped"]
    assert "change log sheet" in changes["skipped"]
    assert "a table of tools and their parameters" in functions["skipped"]
    dataset = confirm_mapping(dataset)
    assert list(dataset.cases.values_list("question", flat=True)) == ["Where is my order?"]
