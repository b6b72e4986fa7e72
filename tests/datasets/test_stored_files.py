"""Stored files are deleted by one helper (evalsite.storage.stored_files_delete): a file that
cannot be deleted is logged and left behind, never an error for the delete that asked."""

import logging

import pytest
from django.core.files.base import ContentFile

from datasets import documents, services
from datasets.models import Dataset, Document
from evalsite.storage import stored_files_delete
from tests.factories import DatasetFactory, TestCaseFactory


def _undeletable(media_root) -> str:
    # A real OSError, no stub: a storage name that is a directory holding a file cannot be
    # removed (rmdir of a non-empty directory fails, even for root).
    folder = media_root / "documents" / "stuck"
    folder.mkdir(parents=True)
    (folder / "inside.txt").write_text("x")
    return "documents/stuck"


def test_an_oserror_is_logged_and_the_other_files_still_go(settings, tmp_path, caplog):
    settings.MEDIA_ROOT = tmp_path
    stuck = _undeletable(tmp_path)
    (tmp_path / "documents" / "gone.pdf").write_bytes(b"%PDF-1.4")

    with caplog.at_level(logging.WARNING, logger="evalsite.storage"):
        stored_files_delete([stuck, "", None, "documents/gone.pdf"])

    assert (tmp_path / stuck).is_dir()
    assert not (tmp_path / "documents" / "gone.pdf").exists()
    assert [record.getMessage() for record in caplog.records] == [f"Could not delete stored file {stuck}"]


@pytest.mark.django_db
def test_deleting_a_dataset_whose_file_cannot_be_removed_still_deletes_it(
    agent, settings, tmp_path, caplog, django_capture_on_commit_callbacks
):
    settings.MEDIA_ROOT = tmp_path
    dataset = DatasetFactory(agent=agent)
    Document.objects.create(
        team=agent.team, dataset=dataset, original_name="plan.pdf", file_type="pdf", file=_undeletable(tmp_path)
    )

    with caplog.at_level(logging.WARNING, logger="evalsite.storage"):
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            services.dataset_delete(dataset=dataset)

    assert len(callbacks) == 1
    assert not Dataset.objects.filter(pk=dataset.pk).exists()
    assert "Could not delete stored file documents/stuck" in caplog.text


@pytest.mark.django_db
def test_detaching_a_document_whose_file_cannot_be_removed_still_detaches_it(
    agent, settings, tmp_path, caplog, django_capture_on_commit_callbacks
):
    settings.MEDIA_ROOT = tmp_path
    case = TestCaseFactory(dataset=DatasetFactory(agent=agent))
    document = Document.objects.create(
        team=agent.team, dataset=case.dataset, original_name="a.pdf", file_type="pdf", file=_undeletable(tmp_path)
    )
    case.documents.add(document)

    with caplog.at_level(logging.WARNING, logger="evalsite.storage"):
        with django_capture_on_commit_callbacks(execute=True):
            documents.case_document_detach(case=case, document=document)

    assert not Document.objects.filter(pk=document.pk).exists()
    assert "Could not delete stored file documents/stuck" in caplog.text


@pytest.mark.django_db
def test_a_rolled_back_upload_removes_its_file(agent, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    document = Document(team=agent.team, dataset=None, original_name="a.pdf", file_type="pdf")
    document.file.save("a.pdf", ContentFile(b"%PDF-1.4"), save=False)
    assert (tmp_path / document.file.name).exists()

    documents.document_file_delete(document)

    assert not (tmp_path / document.file.name).exists()
