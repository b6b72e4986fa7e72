"""Nothing lost or changed silently: every doubtful step of an upload is a warning on the
dataset (naming the file and the sheet/row/line) and on the case it concerns."""

import io

import pytest

from datasets.extraction.validation import validate_file
from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Tables need no model."""


def _warnings(dataset) -> list[str]:
    return [f"{item['where']}: {item['message']}" for item in dataset.warnings]


def _case(dataset, question_start: str):
    return next(case for case in dataset.cases.all() if case.question.lstrip("\t").startswith(question_start))


def test_a_100_kb_question_is_kept_whole_without_a_warning(agent):
    question = "Please summarise this ticket: " + "word " * 20_000
    data = files.csv_bytes([["question", "expected"], [question, "A summary."]])

    dataset = extract(agent, "long.csv", data)

    assert dataset.status == "ready", dataset.failure_reason
    assert len(question) > 100_000
    assert dataset.cases.get().question == question.strip()
    assert dataset.warnings == [] and dataset.status_label == "Ready"


def test_a_cell_over_the_database_limit_is_cut_and_says_where(agent):
    question = "Q" * 250_000
    data = files.csv_bytes([["question", "expected"], ["Short one?", "Yes."], [question, "A"]])

    dataset = extract(agent, "huge.csv", data)

    case = _case(dataset, "QQQ")
    assert len(case.question) == 200_000
    assert case.import_warnings == ["The “question” cell has 250,000 characters; only the first 200,000 were kept."]
    assert "huge.csv, row 3: The “question” cell has 250,000 characters" in _warnings(dataset)[0]
    assert dataset.status_label == "Ready with warnings"


def test_csv_rows_with_the_wrong_number_of_fields(agent):
    data = b"id,question,expected\n1,How long is the refund window?,30 days,extra\n2,Second?,b\n"

    dataset = extract(agent, "cases.csv", data)

    case = _case(dataset, "How long")
    assert case.import_warnings == [
        "The row has 4 cells but the header has 3: the cells past the last header were kept as metadata "
        "(“Column D”); check the cells were read into the right columns."
    ]
    assert case.metadata == {"Column D": "extra"}
    assert any(w.startswith("cases.csv, row 2: The row has 4 cells") for w in _warnings(dataset))


def test_an_unclosed_quote_that_swallows_lines_is_named(agent):
    data = b'id,question,expected\n1,"How long is the refund window?,30 days\n2,Second?,b\n3,Third?,c\n'

    dataset = extract(agent, "quote.csv", data)

    assert dataset.cases.count() == 1
    case = dataset.cases.get()
    assert any("closing quote is probably missing" in w for w in case.import_warnings)
    assert any(
        w.startswith("quote.csv, lines 2-4: A quoted cell opened on line 2 runs to line 4") for w in _warnings(dataset)
    )


def test_a_windows_1252_file_is_read_with_the_encoding_named_and_the_rows(agent):
    data = "question,expected\nCafé opening hours?,9–17\nPlain?,Yes\n".encode("cp1252")

    dataset = extract(agent, "ansi.csv", data)

    assert dataset.cases.order_by("position").first().question == "Café opening hours?"
    (warning,) = [w for w in _warnings(dataset) if "Windows-1252" in w]
    assert warning.startswith("ansi.csv, line 2: The file is not UTF-8, so it was read as Windows-1252")
    assert any("not valid in the file's encoding" in w for w in _case(dataset, "Café").import_warnings)


def test_a_utf8_file_with_a_few_bad_bytes_keeps_utf8_and_names_the_lines(agent):
    data = "question,expected\nÜber uns?,Grüße\nNaïve?,Oui\n".encode() + b"Bad \xe9 byte?,x\nBad \xc3\xa9\xff?,y\n"

    dataset = extract(agent, "mixed.csv", data)

    questions = list(dataset.cases.order_by("position").values_list("question", flat=True))
    assert questions == ["Über uns?", "Naïve?", "Bad é byte?", "Bad é\ufffd?"]
    assert any(w.startswith("mixed.csv, line 4: These lines are not UTF-8") for w in _warnings(dataset))
    assert any(
        w.startswith("mixed.csv, line 5: Some bytes on these lines are not valid UTF-8") for w in _warnings(dataset)
    )


def test_nul_bytes_in_a_text_file_are_stripped_with_a_warning_not_called_binary(agent):
    data = b"question,expected\nWhere is my or\x00der?,In Orders\nSecond?,Yes\n"
    assert validate_file("nul.csv", io.BytesIO(data), len(data), max_bytes=10_000).file_type == "csv"

    dataset = extract(agent, "nul.csv", data)

    assert dataset.status == "ready"
    assert dataset.cases.order_by("position").first().question == "Where is my order?"
    assert any(w.startswith("nul.csv, line 2: The file held 1 NUL bytes") for w in _warnings(dataset))


def test_a_space_before_a_formula_character_is_flagged(agent):
    data = files.csv_bytes([["question", "expected"], [' =HYPERLINK("http://x")', "No"], ["Fine?", "Yes"]])

    dataset = extract(agent, "formula.csv", data)

    case = _case(dataset, "=HYPERLINK")
    assert "starts with a space before “=”" in case.import_warnings[0]
    assert any("formula.csv, row 2" in w and "starts with a space" in w for w in _warnings(dataset))


def test_a_tab_before_a_formula_character_is_kept_as_typed(agent):
    """The tab is how a spreadsheet user keeps "=1+1" from running: it is what they typed."""
    data = files.csv_bytes([["question", "expected"], ["\t=1+1", "2"], ["'=2+2", "4"], ["Fine?", "Yes"]])

    dataset = extract(agent, "typed.csv", data)

    assert _case(dataset, "=1+1").question == "\t=1+1"
    assert _case(dataset, "'=2+2").question == "'=2+2"
    assert not any("=" in w for w in _warnings(dataset))


def test_a_formula_without_a_cached_value_is_flagged(agent):
    data = files.xlsx_bytes(
        {"Cases": [["Question", "Expected answer"], ["Shipping time?", '=CONCAT("3-5 ","days")'], ["B?", "b"]]}
    )

    dataset = extract(agent, "formulas.xlsx", data)

    case = _case(dataset, "Shipping")
    assert case.expected_answer == ""
    assert any("formula with no saved value" in w for w in case.import_warnings)
    assert any(w.startswith("formulas.xlsx, Cases row 2: ") and "formula" in w for w in _warnings(dataset))


def test_merged_cells_whose_value_was_spread_are_flagged(agent):
    data = files.xlsx_bytes(
        {
            "Cases": [
                ["Question", "Expected answer"],
                ["Refund after 10 days?", "Yes, within 30 days."],
                ["Refund after 20 days?", None],
            ]
        },
        merges={"Cases": ["B2:B3"]},
    )

    dataset = extract(agent, "merged.xlsx", data)

    case = _case(dataset, "Refund after 20")
    assert case.expected_answer == "Yes, within 30 days."
    assert case.import_warnings == [
        "The “Expected answer” value comes from the merged cells B2:B3: it was copied to every cell of the range."
    ]
    assert _case(dataset, "Refund after 10").import_warnings == []
    assert any(w.startswith("merged.xlsx, Cases row 3: The “Expected answer” value") for w in _warnings(dataset))


def test_empty_expected_answers_are_flagged_per_case_and_counted(agent):
    data = files.csv_bytes([["question", "expected"], ["One?", ""], ["Two?", "2"], ["Three?", ""]])

    dataset = extract(agent, "gaps.csv", data)

    assert _case(dataset, "One").import_warnings == [
        "No expected answer: the judge scores this case without a reference answer."
    ]
    assert _case(dataset, "Two").import_warnings == []
    assert "gaps.csv, row 2, row 4: 2 cases: No expected answer" in _warnings(dataset)[0]


def test_rows_pasted_twice_are_dropped_with_a_warning(agent):
    data = files.csv_bytes([["question", "expected"], ["One?", "1"], ["One?", "1"], ["Two?", "2"]])

    dataset = extract(agent, "twice.csv", data)

    assert dataset.cases.count() == 2
    assert any(w.startswith("twice.csv, row 3: 1 row(s) repeat an earlier case exactly") for w in _warnings(dataset))


def test_a_quote_never_closed_to_the_end_of_the_file_is_named(agent):
    data = b'question,expected\nFirst?,Yes\n"Never closed?,Yes\n'

    dataset = extract(agent, "open.csv", data)

    assert any("quote is never closed" in w for w in _case(dataset, "Never").import_warnings)
    assert any(w.startswith("open.csv, row 3: A quote is never closed") for w in _warnings(dataset))


def test_filling_in_the_expected_answer_clears_that_warning_on_the_case(agent):
    from datasets.services import case_update

    dataset = extract(agent, "gaps.csv", files.csv_bytes([["question", "expected"], ["One?", ""]]))
    case = dataset.cases.get()

    case_update(case=case, expected_answer="1")

    case.refresh_from_db()
    assert case.import_warnings == []
