"""Hostile CSVs that read without error but could be read wrong (issue 48): one case per row
the user wrote, and a warning naming the file and the row for every byte decoded by a guess,
quote that never closed, row padded or cut, and column that would be lost. Both ways in are
read: an upload (the extraction job) and "Import CSV" on a dataset (datasets.csv_import)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from datasets.csv_import import parse_csv
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Tables need no model."""


def _warnings(dataset) -> list[str]:
    return [f"{item['where']}: {item['message']}" for item in dataset.warnings]


def _questions(dataset) -> list[str]:
    return list(dataset.cases.order_by("position").values_list("question", flat=True))


def test_a_stray_carriage_return_inside_a_cell_does_not_split_the_row(agent):
    """Excel on a Mac writes a line break in a cell as a lone CR: 3 rows, not 4."""
    data = b"Question,Expected answer\nOne?,1\nTwo,\rstill two?,2\nThree?,3\n".replace(b"Two,\r", b"Two\r")

    dataset = extract(agent, "cr.csv", data)

    assert _questions(dataset) == ["One?", "Two\nstill two?", "Three?"]
    assert any(w.startswith("cr.csv, row 3: ") and "carriage return" in w for w in _warnings(dataset)), _warnings(
        dataset
    )


def test_a_stray_carriage_return_in_an_import_is_one_row_too():
    parsed = parse_csv(b"question,expected_answer\nOne?,1\nTwo\rstill two?,2\nThree?,3\n")

    assert [case["question"] for case in parsed.cases] == ["One?", "Two\nstill two?", "Three?"]
    assert any(w["where"] == "row 3" and "carriage return" in w["message"] for w in parsed.warnings)


def test_a_file_with_old_mac_line_ends_is_read_as_rows():
    parsed = parse_csv(b"question,expected_answer\rOne?,1\rTwo?,2\rThree?,3\r")

    assert [case["question"] for case in parsed.cases] == ["One?", "Two?", "Three?"]


def test_ragged_rows_give_one_case_each_and_say_what_was_padded_or_kept(agent):
    data = b"Question,Expected answer\nOne?\nTwo?,Yes,extra,cells\n,\nThree?,Yes\n"

    dataset = extract(agent, "ragged.csv", data)

    cases = list(dataset.cases.order_by("position"))
    assert [case.question for case in cases] == ["One?", "Two?", "Three?"]
    assert cases[1].metadata == {"Column C": "extra", "Column D": "cells"}
    warnings = _warnings(dataset)
    assert any(
        w.startswith("ragged.csv, row 2: The row has 1 cells") and "“Expected answer” left empty" in w for w in warnings
    )
    assert any(
        w.startswith("ragged.csv, row 3: The row has 4 cells") and "“Column C”, “Column D”" in w for w in warnings
    )


def test_a_quote_inside_an_unquoted_cell_is_named_on_its_own_row(agent):
    data = b'Question,Expected answer\nHe said "hi,Yes\nSecond?,No\nThird?,Yes\n'

    dataset = extract(agent, "quote.csv", data)

    assert _questions(dataset) == ['He said "hi', "Second?", "Third?"]
    warnings = [w for w in _warnings(dataset) if "quote" in w]
    assert warnings and all(w.startswith("quote.csv, row 2: ") for w in warnings), warnings


def test_a_utf8_file_with_one_bad_byte_keeps_its_other_lines_as_utf8(agent):
    data = "Question,Expected answer\nÜber uns?,Grüße\n".encode() + b"Bad \xe9 byte?,x\nok?,y\n"

    dataset = extract(agent, "mixed.csv", data)

    assert _questions(dataset) == ["Über uns?", "Bad é byte?", "ok?"]
    (warning,) = [w for w in _warnings(dataset) if "Windows-1252" in w]
    assert warning.startswith("mixed.csv, line 3: ")
    assert "row 3" in "\n".join(_warnings(dataset))


def test_an_import_refuses_bad_bytes_naming_the_row_and_the_encoding_it_looks_like():
    with pytest.raises(ValidationError) as refused:
        parse_csv("question,expected_answer\nCafé?,Oui\n".encode("cp1252"))

    assert "line 2" in refused.value.messages[0] and "Windows-1252" in refused.value.messages[0]


def test_two_columns_with_the_same_header_keep_both_cells(agent):
    data = b"Question,Expected answer,Notes,Notes\nOne?,1,first note,second note\n"

    dataset = extract(agent, "dup.csv", data)

    case = dataset.cases.get()
    assert sorted(case.metadata.values()) == ["first note", "second note"]
    assert any("“Notes”" in w and "same header" in w for w in _warnings(dataset)), _warnings(dataset)


def test_two_columns_with_the_same_header_keep_both_cells_on_import():
    parsed = parse_csv(b"question,expected_answer,Notes,Notes\nOne?,1,first note,second note\n")

    assert sorted(parsed.cases[0]["metadata"].values()) == ["first note", "second note"]
    assert any("“Notes”" in w["message"] and "same header" in w["message"] for w in parsed.warnings)


def test_a_kept_column_cut_to_the_metadata_limit_says_so(agent):
    data = b"Question,Expected answer,Notes\nOne?,1," + b"n" * 12_000 + b"\n"

    dataset = extract(agent, "long-notes.csv", data)

    case = dataset.cases.get()
    assert len(case.metadata["Notes"]) == 10_000
    assert case.import_warnings == ["The “Notes” cell has 12,000 characters; the first 10,000 were kept."]
    assert any(w.startswith("long-notes.csv, row 2: The “Notes” cell has 12,000") for w in _warnings(dataset))


def test_a_quote_never_closed_is_found_by_its_ids_when_the_quotes_pair_up_by_chance(agent):
    """Two unclosed quotes pair up with each other: the rows between them look short, but
    each starts with the next id, so the swallowed rows are named."""
    data = b'id,question,expected\n1,"How long is the refund window?,30 days\n2,Second?\n3,"Third?,c\n4,Four?,d\n'

    dataset = extract(agent, "ids.csv", data)

    assert any(
        w.startswith("ids.csv, lines 2-4: A quoted cell opened on line 2 runs to line 4") for w in _warnings(dataset)
    ), _warnings(dataset)


def test_a_byte_order_mark_before_windows_1252_text_leaves_the_header_clean(agent):
    data = b"\xef\xbb\xbfquestion,expected\nCaf\xe9?,Oui\n"

    dataset = extract(agent, "bom.csv", data)

    case = dataset.cases.get()
    assert case.question == "Café?" and case.expected_answer == "Oui"
    assert any(w.startswith("bom.csv, line 2: ") and "Windows-1252" in w for w in _warnings(dataset))
