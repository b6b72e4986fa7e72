"""Hostile test plans that read without error but could be read wrong (issue 48): a table
must give exactly one case per row the user wrote, and every step that drops, cuts,
joins, pads or guesses is a warning naming the file and the row (or line, page, cell).

The files are built here; each test says what a QA person must see.
"""

from __future__ import annotations

import pytest

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
