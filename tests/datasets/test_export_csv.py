"""CSV export: formula injection neutralised, every field quoted, importable again."""

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from datasets.exporters import CSV_HEADER, dataset_export_csv
from datasets.fields import neutralise
from datasets.services import dataset_import_csv
from tests.factories import DatasetFactory, TestCaseFactory

FIELDS = (
    "case_id", "question", "expected_answer", "document_context", "turns", "expected_tools", "trajectory_mode",
    "check_tool_args", "expected_context", "judge_guideline", "tags", "smoke_count", "smoke_guidance",
    "tests_rule", "source_file", "source_location", "source_span",
)  # fmt: skip


def _rows(text: str) -> list[list[str]]:
    assert text.startswith("\ufeff")
    return list(csv.reader(io.StringIO(text[1:], newline="")))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+2", "'+1+2"),
        ("-2", "'-2"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("\rcmd", "'\rcmd"),
        ("\ncmd", "'\ncmd"),
        ("'=already quoted", "''=already quoted"),
        ("plain = text", "plain = text"),
        ("'apostrophe", "'apostrophe"),
        ("", ""),
    ],
)
def test_neutralise(value, expected):
    assert neutralise(value) == expected


@pytest.mark.django_db
def test_no_exported_cell_can_start_a_formula(agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(
        dataset=dataset,
        case_id="=1+1",
        question='=HYPERLINK("http://evil.example","Click")',
        expected_answer="+cmd|' /C calc'!A0",
        judge_guideline="-2+3",
        document_context="@SUM(1)",
        smoke_guidance="\tTab first",
        tags=["=tag"],
    )

    rows = _rows(dataset_export_csv(dataset=dataset))

    assert rows[0] == list(CSV_HEADER)
    for cell in rows[1]:
        assert not cell or cell[0] not in "=+-@\t\r\n", cell
    assert rows[1][1] == '\'=HYPERLINK("http://evil.example","Click")'


@pytest.mark.django_db
def test_every_field_is_quoted(agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset, question="Plain")

    text = dataset_export_csv(dataset=dataset)

    assert text.splitlines()[1].startswith('"",' + '"Plain"')


@pytest.mark.django_db
def test_export_then_import_gives_the_same_cases(agent):
    source = DatasetFactory(agent=agent)
    TestCaseFactory(
        dataset=source,
        case_id="r-1",
        question="=Is this a formula?",
        expected_answer="-No, it is text; with “quotes”, commas and\nnewlines.",
        document_context="Invoice PDF",
        turns=[{"user": "Hi", "expected": "Hello"}, {"user": "@bot", "expected": ""}],
        expected_tools=[{"name": "lookup", "args": {"id": "A-1", "n": 2}}],
        trajectory_mode="subset",
        check_tool_args=True,
        expected_context=["Chunk one", "Chunk two"],
        judge_guideline="'=quoted already",
        tags=["refunds", "edge case"],
        smoke_count=3,
        smoke_guidance="casual",
        tests_rule="Refund policy, rule 2",
        source_file="plan.xlsx",
        source_location="Sheet1 row 12",
        source_span="Refund window: 30 days",
    )
    TestCaseFactory(dataset=source, question="Second, without id", expected_answer="")
    target = DatasetFactory(agent=agent)

    exported = dataset_export_csv(dataset=source)
    dataset_import_csv(dataset=target, file=SimpleUploadedFile("x.csv", exported.encode("utf-8")))

    assert list(target.cases.order_by("position").values(*FIELDS)) == list(
        source.cases.order_by("position").values(*FIELDS)
    )


# ---- the download view ------------------------------------------------------------


def _url(dataset) -> str:
    return reverse("datasets:export_csv", args=[dataset.agent_id, dataset.pk])


@pytest.mark.django_db
def test_download_is_an_attachment_named_after_the_dataset(client_alice, agent):
    dataset = DatasetFactory(agent=agent, name="Refund Questions / v2")
    TestCaseFactory(dataset=dataset, question="Q?")

    response = client_alice.get(_url(dataset))

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="refund-questions-v2.csv"'
    assert "Q?" in response.content.decode("utf-8")


@pytest.mark.django_db
def test_download_is_404_for_outsiders_405_for_post_and_needs_login(client_charlie, client_alice, client, agent):
    dataset = DatasetFactory(agent=agent)

    assert client_charlie.get(_url(dataset)).status_code == 404
    assert client_alice.post(_url(dataset)).status_code == 405
    assert client.get(_url(dataset)).status_code == 302
