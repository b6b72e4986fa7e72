"""Shared fixtures and helpers for the upload, extraction and document tests.

Import the fixtures into a test module (`from tests.datasets.extraction_helpers import media_root`)
so every stored file lands in the test's own tmp_path, never in var/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.base import ContentFile

from agents.models import Agent
from datasets.extraction.mapping import dataset_mapping_confirm
from datasets.extraction.services import dataset_extract
from datasets.models import Dataset, Document


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path: Path) -> Path:
    root = tmp_path / "media"
    root.mkdir()
    settings.MEDIA_ROOT = root
    return root


def stored_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def uploaded_dataset(agent: Agent, filename: str, data: bytes, *, file_type: str | None = None) -> Dataset:
    """A dataset in Extracting with `data` stored as its document, as if it came through the upload
    form, but without the form's checks: for testing what the job does with any file."""
    dataset = Dataset.objects.create(
        agent=agent,
        name=f"From {filename}"[:120],
        status=Dataset.Status.EXTRACTING,
        source=Dataset.Source.UPLOAD,
        source_name=filename,
    )
    document = Document(
        team=agent.team,
        dataset=dataset,
        original_name=filename,
        size=len(data),
        file_type=file_type or filename.rsplit(".", 1)[-1].lower(),
    )
    document.file.save("upload", ContentFile(data), save=True)
    return dataset


def extract(agent: Agent, filename: str, data: bytes, *, confirm: bool = True, **kwargs: str) -> Dataset:
    """Upload-and-extract in one call (the job run in-process); returns the settled dataset.

    With confirm (the default), a dataset that stops at the mapping step is confirmed as
    suggested, keeping the first 500 cases, as a user clicking "Create test cases" would."""
    dataset = uploaded_dataset(agent, filename, data, **kwargs)
    dataset_extract(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    if confirm and dataset.status == Dataset.Status.REVIEW:
        confirm_mapping(dataset)
    return dataset


def confirm_mapping(dataset: Dataset, chosen: dict | None = None, *, keep_first: bool = True) -> Dataset:
    """Confirm the mapping step and run the job it sends, in-process."""
    dataset_mapping_confirm(dataset=dataset, chosen=chosen, keep_first=keep_first)
    dataset_extract(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    return dataset


def case_rows(dataset: Dataset) -> list[tuple[str, str, str]]:
    return list(dataset.cases.order_by("position").values_list("question", "expected_answer", "source_location"))
