"""CSV import (datasets.services.dataset_import_csv): encodings, separators, upserts, all or nothing."""

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile

from datasets.services import dataset_import_csv
from tests.factories import DatasetFactory, TestCaseFactory


def _csv(text: str, *, bom: bool = False, name: str = "cases.csv") -> SimpleUploadedFile:
    data = text.encode("utf-8")
    return SimpleUploadedFile(name, (b"\xef\xbb\xbf" if bom else b"") + data)


def _cases(dataset) -> list[tuple[str, str, str]]:
    return list(dataset.cases.order_by("position", "id").values_list("case_id", "question", "expected_answer"))


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


@pytest.mark.django_db
def test_utf8_with_bom_and_commas(dataset):
    result = dataset_import_csv(
        dataset=dataset, file=_csv("query,expected_results\nCafé opening hours?,9–17 ✓\n", bom=True)
    )

    assert result.created == 1
    assert _cases(dataset) == [("", "Café opening hours?", "9–17 ✓")]


@pytest.mark.django_db
def test_semicolon_separated_with_quoted_separators_and_newlines(dataset):
    text = 'Question;Expected Answer;Tags\n"Refund; how?";"Line one\nLine two";"refunds, edge"\nSecond?;Yes;\n'

    dataset_import_csv(dataset=dataset, file=_csv(text))

    first, second = dataset.cases.order_by("position")
    assert first.question == "Refund; how?" and first.expected_answer == "Line one\nLine two"
    assert first.tags == ["refunds", "edge"]
    assert second.question == "Second?" and second.tags == []


@pytest.mark.django_db
def test_optional_columns_are_read(dataset):
    text = (
        "case_id,question,expected_answer,judge_guideline,expected_tools,trajectory_mode,check_tool_args\n"
        'r-1,Where is A-1?,Shipped,Mention the carrier,"lookup_order, notify",unordered,true\n'
        'r-2,Refund A-2?,Yes,,"[{""name"": ""refund"", ""args"": {""order"": ""A-2""}}]",,\n'
    )

    dataset_import_csv(dataset=dataset, file=_csv(text))

    first, second = dataset.cases.order_by("position")
    assert first.case_id == "r-1" and first.judge_guideline == "Mention the carrier"
    assert first.expected_tools == [{"name": "lookup_order", "args": {}}, {"name": "notify", "args": {}}]
    assert first.trajectory_mode == "unordered" and first.check_tool_args
    assert second.expected_tools == [{"name": "refund", "args": {"order": "A-2"}}]
    assert second.trajectory_mode == "strict"


@pytest.mark.django_db
def test_reimport_by_case_id_updates_instead_of_duplicating(dataset):
    text = "case_id,question,expected_answer\nr-1,How long?,30 days\nr-2,Who pays?,We do\n,No id,Appended\n"
    dataset_import_csv(dataset=dataset, file=_csv(text))
    case = dataset.cases.get(case_id="r-1")
    case.tags = ["kept"]
    case.save()

    result = dataset_import_csv(
        dataset=dataset, file=_csv("case_id,question,expected_answer\nr-1,How long?,Thirty days\nr-2,Who pays?,We do\n")
    )
    again = dataset_import_csv(
        dataset=dataset, file=_csv("case_id,question,expected_answer\nr-1,How long?,Thirty days\nr-2,Who pays?,We do\n")
    )

    assert (result.created, result.updated) == (0, 2)
    assert (again.created, again.updated) == (0, 2)
    assert _cases(dataset) == [
        ("r-1", "How long?", "Thirty days"),
        ("r-2", "Who pays?", "We do"),
        ("", "No id", "Appended"),
    ]
    # Columns the file does not have are left alone.
    assert dataset.cases.get(case_id="r-1").tags == ["kept"]


@pytest.mark.django_db
def test_a_bad_row_rejects_the_whole_file_with_its_row_number(dataset):
    TestCaseFactory(dataset=dataset, case_id="r-1", question="Original", expected_answer="Original")
    text = "case_id,question,expected_answer\nr-1,Changed,Changed\nr-2,New,New\nr-3,,No question here\nr-4,Fine,smoke\n"

    with pytest.raises(ValidationError) as exc:
        dataset_import_csv(dataset=dataset, file=_csv(text))

    assert exc.value.messages == ["Row 4: Question: Write the question the agent should answer."]
    assert _cases(dataset) == [("r-1", "Original", "Original")]


@pytest.mark.django_db
def test_every_bad_row_is_listed(dataset):
    text = "question,smoke_count,case_id\n,1,a\nok,42,b\nok,2,a\nfine,,c\nok,1,c\n"

    with pytest.raises(ValidationError) as exc:
        dataset_import_csv(dataset=dataset, file=_csv(text))

    assert exc.value.messages == [
        "Row 2: Question: Write the question the agent should answer.",
        "Row 3: Smoke-test paraphrases: Enter a whole number from 1 to 10, or leave it empty.",
        "Row 6: case_id “c” is already used on row 5.",
    ]
    assert not dataset.cases.exists()


@pytest.mark.django_db
def test_blank_lines_are_skipped_and_extra_cells_are_an_error(dataset):
    with pytest.raises(ValidationError) as exc:
        dataset_import_csv(dataset=dataset, file=_csv("question,expected_answer\n\nA,B\nC,D,surprise\n"))

    assert exc.value.messages == ["Row 4: it has 3 cells but the header has 2 columns."]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b"answer,notes\nx,y\n",
            "The file needs a “question” (or “query”) column. The columns found are: answer, notes.",
        ),
        ("question\nCaf\xe9\n".encode("cp1252"), "The file is not UTF-8 text"),
        (b"question\n", "The file has its header row (question) but no rows under it"),
        (b"Question,Expected Answer\n", "The file has its header row (Question, Expected Answer) but no rows under it"),
        (b"query,question\na,b\n", "Row 1: the columns “query” and “question” both hold question; keep one."),
    ],
)
@pytest.mark.django_db
def test_unreadable_files_get_a_message_a_person_understands(dataset, data, message):
    with pytest.raises(ValidationError) as exc:
        dataset_import_csv(dataset=dataset, file=SimpleUploadedFile("x.csv", data))

    assert exc.value.messages[0].startswith(message)


@pytest.mark.django_db
def test_more_than_500_cases_in_one_file_are_refused(dataset):
    text = "question\n" + "".join(f"Question {i}\n" for i in range(501))

    with pytest.raises(ValidationError) as exc:
        dataset_import_csv(dataset=dataset, file=_csv(text))

    assert "The file has 501 test cases; at most 500" in exc.value.messages[0]
    assert not dataset.cases.exists()


@pytest.mark.django_db
def test_exactly_500_cases_are_imported(dataset, django_assert_max_num_queries):
    text = "case_id,question\n" + "".join(f"c{i},Question {i}\n" for i in range(500))

    # SQLite caps bind variables, so bulk_create inserts ~50 rows per statement; never one per row.
    with django_assert_max_num_queries(30):
        result = dataset_import_csv(dataset=dataset, file=_csv(text))

    assert result.created == 500 and dataset.cases.count() == 500


@pytest.mark.django_db
def test_unknown_columns_are_ignored_and_reported(dataset):
    result = dataset_import_csv(dataset=dataset, file=_csv("question,priority\nQ,high\n"))

    assert result.ignored_columns == ["priority"]
    assert "Kept as case metadata: priority." in result.message
    assert dataset.cases.get().metadata == {"priority": "high"}


@pytest.mark.django_db
def test_the_peer_bench_columns_id_and_expected_are_mapped(dataset):
    dataset_import_csv(dataset=dataset, file=_csv("id,question,expected\nq-1,What is 2+2?,4\n"))

    assert _cases(dataset) == [("q-1", "What is 2+2?", "4")]


@pytest.mark.django_db
def test_nul_bytes_short_rows_and_open_quotes_are_imported_with_warnings(dataset):
    data = b'question,expected,notes\nWhere is my or\x00der?,In Orders,x\nShort row?\n"Never closed?,Yes\n'

    result = dataset_import_csv(dataset=dataset, file=SimpleUploadedFile("odd.csv", data))

    first, short, last = dataset.cases.order_by("position")
    assert first.question == "Where is my order?"
    assert short.import_warnings[0].startswith("The row has 1 fields but the header has 3")
    assert "quote is never closed" in last.import_warnings[-1]
    dataset.refresh_from_db()
    places = [f"{w['where']}: {w['message']}" for w in dataset.warnings]
    assert places[0].startswith("odd.csv, line 2: The file held 1 NUL bytes")
    assert any(p.startswith("odd.csv, row 3: The row has 1 fields") for p in places)
    assert "warnings (see the dataset page), the first: line 2: The file held 1 NUL bytes" in result.message


# The CSV is read by the upload pipeline's reader (extraction.text_files.csv_table): its checks
# and its separators hold for an import too.


@pytest.mark.django_db
def test_a_quote_that_swallows_rows_names_the_lines_it_ran_over(dataset):
    text = 'question,expected_answer\n"Open quote?,Yes\nSecond?,No\nThird?,Maybe\n'

    dataset_import_csv(dataset=dataset, file=_csv(text, name="open.csv"))

    dataset.refresh_from_db()
    places = [f"{w['where']}: {w['message']}" for w in dataset.warnings]
    assert "open.csv, lines 2-4: A quoted cell opened on line 2 runs to line 4 and holds 2 lines" in places[-1]
    assert "a closing quote is probably missing" in dataset.cases.get().import_warnings[-1]


@pytest.mark.django_db
def test_a_blank_first_line_and_bar_separators_are_read(dataset):
    dataset_import_csv(dataset=dataset, file=_csv("\nquestion|expected\nWhat is 2+2?|4\n"))

    assert _cases(dataset) == [("", "What is 2+2?", "4")]


@pytest.mark.django_db
def test_a_cell_over_the_field_limit_is_refused_by_its_row_and_size(dataset):
    with pytest.raises(ValidationError) as exc:
        dataset_import_csv(dataset=dataset, file=_csv("question\n" + "x" * 300_000 + "\n"))

    assert exc.value.messages == ["Row 2: Question: Keep this under 200,000 characters (it has 300,000)."]
