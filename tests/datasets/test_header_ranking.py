"""The column ranking: a header naming what the user says beats one describing the case,
in every file type that holds tables (XLSX, XLS, CSV, DOCX, Markdown) and in PDF's labelled blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from datasets.extraction.child import extract as child_extract
from datasets.models import Dataset
from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401

# (headers, the question column, the expected answer column): test plans and UAT scripts as
# teams write them. The case-describing column sits left of the dialogue one, with longer text.
HEADER_SETS = [
    (["Scenario", "User says", "Expected response"], "User says", "Expected response"),
    (["TC ID", "Title", "Customer says", "Agent should say", "Priority"], "Customer says", "Agent should say"),
    (["Intent", "Description", "Utterance", "Expected reply"], "Utterance", "Expected reply"),
    (["ID", "Description", "User message", "Expected output"], "User message", "Expected output"),
    (["Test case", "Prompt", "Ideal response"], "Prompt", "Ideal response"),
    (["Summary", "Input", "Expected result", "Notes"], "Input", "Expected result"),
    (["Case", "Query", "Ground truth"], "Query", "Ground truth"),
    (["Title", "Message", "Expected answer", "Owner"], "Message", "Expected answer"),
    (["Scenario", "Question", "Answer"], "Question", "Answer"),
    (["Test scenario", "What the user says", "What the agent says"], "What the user says", "What the agent says"),
    (["Area", "Scenario", "User utterance", "Expected behaviour"], "User utterance", "Expected behaviour"),
    (["Test title", "Caller says", "Expected agent response"], "Caller says", "Expected agent response"),
    (["Module", "Scenario description", "User input", "Expected Result", "Status"], "User input", "Expected Result"),
    (["Test steps", "Customer question", "Correct answer"], "Customer question", "Correct answer"),
]
DESCRIPTIONS = [
    "Customer on an annual plan wants their money back ten days after buying and expects to be eligible",
    "A frustrated customer who was charged twice this month contacts support about the duplicate payment",
    "Returning user who forgot the password and no longer has access to the registered email address",
]
MESSAGES = ["Can I get a refund on my annual plan?", "Why was I charged twice?", "I can't log in, help"]
ANSWERS = ["Yes, within 14 days.", "Apologise and open a billing ticket.", "Offer the account recovery form."]


def _rows(headers: list[str], question: str, expected: str) -> list[list[str]]:
    rows = [headers]
    for number in range(3):
        row = []
        for header in headers:
            if header == question:
                row.append(MESSAGES[number])
            elif header == expected:
                row.append(ANSWERS[number])
            elif header in ("TC ID", "ID", "Case"):
                row.append(f"TC-{number + 1}")
            else:
                row.append(DESCRIPTIONS[number])
        rows.append(row)
    return rows


def _markdown(rows: list[list[str]]) -> bytes:
    lines = ["# UAT script", "", "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines).encode()


WRITERS = {
    "xlsx": lambda rows: files.xlsx_bytes({"Plan": rows}),
    "xls": lambda rows: files.xls_bytes({"Plan": rows}),
    "csv": files.csv_bytes,
    "docx": lambda rows: files.docx_bytes(["UAT script", rows]),
    "md": _markdown,
}


@pytest.mark.parametrize("file_type", list(WRITERS))
@pytest.mark.parametrize(("headers", "question", "expected"), HEADER_SETS, ids=[s[1] for s in HEADER_SETS])
def test_the_header_naming_what_the_user_says_is_the_question(tmp_path: Path, file_type, headers, question, expected):
    path = tmp_path / f"plan.{file_type}"
    path.write_bytes(WRITERS[file_type](_rows(headers, question, expected)))

    answer = child_extract({"path": str(path), "file_type": file_type, "max_cases": 500, "mapping": None})

    fields = {column["header"]: column["field"] for column in answer["tables"][0]["columns"]}
    assert fields[question] == "question"
    assert fields[expected] == "expected_answer"
    assert [case["question"] for case in answer["cases"]] == MESSAGES


@pytest.mark.django_db
def test_a_word_uat_script_maps_user_says_as_the_question(agent, no_llm):
    rows = [["Scenario", "User says", "Expected result"]]
    rows += [[f"Scenario {n}: {DESCRIPTIONS[n % 3]}", f"Question {n}?", f"Answer {n}."] for n in range(1, 11)]
    data = files.docx_bytes(["Acme UAT script", "Run each scenario in the staging chat.", rows])

    dataset = extract(agent, "uat.docx", data)

    assert dataset.status == Dataset.Status.READY
    cases = list(dataset.cases.order_by("position"))
    assert [case.question for case in cases] == [f"Question {n}?" for n in range(1, 11)]
    assert cases[0].metadata == {"Scenario": f"Scenario 1: {DESCRIPTIONS[1]}"}


@pytest.mark.django_db
def test_a_pdf_script_takes_what_the_user_says_over_the_scenario(agent, no_llm):
    lines = []
    for number in range(3):
        lines += [
            f"Scenario: {DESCRIPTIONS[number][:80]}",
            f"User says: {MESSAGES[number]}",
            f"Expected: {ANSWERS[number]}",
            "",
        ]
    dataset = extract(agent, "uat.pdf", files.pdf_bytes([lines]))

    cases = list(dataset.cases.order_by("position"))
    assert [case.question for case in cases] == MESSAGES
    assert [case.expected_answer for case in cases] == ANSWERS
    assert cases[0].metadata == {"Scenario": DESCRIPTIONS[0][:80]}
