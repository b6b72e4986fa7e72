"""The small losses: a header-only file says so, a row dropped for having no question is a
warning naming the file and row, and a cell's leading tab or apostrophe is stored as typed."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from datasets.models import Dataset
from datasets.services import dataset_import_csv
from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401
from tests.factories import DatasetFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Read without a model."""


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("empty.csv", b"Question,Expected Answer\n"),
        ("empty.xlsx", files.xlsx_bytes({"Cases": [["Question", "Expected Answer"]]})),
    ],
)
def test_a_header_only_file_says_it_has_headers_but_no_rows(agent, name, data):
    dataset = extract(agent, name, data)

    assert dataset.status == Dataset.Status.FAILED
    assert "header row (Question, Expected Answer) but no rows under it" in dataset.failure_reason
    assert "no question column" not in dataset.failure_reason


def test_a_ragged_row_without_a_question_is_a_warning_naming_the_file_and_row(agent):
    data = b"Question,Expected Answer,Notes\nWhere is my order?,Use tracking,\n,Lost answer,note\nHours?,9-17,\n"

    dataset = extract(agent, "ragged.csv", data)

    assert dataset.cases.count() == 2
    assert any(w["where"] == "ragged.csv, row 3" and "no “Question” cell" in w["message"] for w in dataset.warnings), (
        dataset.warnings
    )


@pytest.mark.parametrize("typed", ["\t=1+1", "'=1+1", "'quoted'"])
def test_the_csv_import_stores_a_leading_tab_or_apostrophe_as_typed(agent, typed):
    dataset = DatasetFactory(agent=agent)
    data = files.csv_bytes([["question", "expected_answer"], [typed, "2"]])

    dataset_import_csv(dataset=dataset, file=SimpleUploadedFile("typed.csv", data))

    assert dataset.cases.get().question == typed
