"""Every file of the hostile corpus, through the real upload view and the real extraction job.

The job runs in this process (its Celery task, applied eagerly), parsing in the same
sandboxed child process a worker uses; tests/datasets/test_extraction_worker.py drives
a real worker. For every file (checks 5-12 and 29 in docs/architecture.md):
- the upload is refused with a reason, or the job settles (Failed with a reason a QA
  person can act on, or Ready with the cases) within 60 s: never Extracting, never a 5xx;
- no page or fragment of the datasets area shows a traceback or an exception class name;
- an XML entity is never expanded: `root:x:` is in no page, export, download or database row;
- nothing is written outside MEDIA_ROOT, and inside it only under server-made names;
- the original file downloads byte for byte, as an attachment.
"""

from __future__ import annotations

import html
import re
import tempfile
import time
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import escape

from datasets.extraction.mapping import dataset_mapping_confirm
from datasets.models import Dataset, Document, TestCase
from datasets.tasks import dataset_extract as dataset_extract_task
from tests.datasets.files import upload
from tests.hostile.corpus import CORPUS, FAILED, READY, REFUSED, XSS_PAYLOADS, Hostile, html_pdf_polyglot
from tests.hostile.pages import (
    LEAK,
    assert_database_clean,
    assert_no_leaks,
    body,
    files_under,
    raw,
    read_dataset_pages,
)

pytestmark = pytest.mark.django_db

STORED_NAME = re.compile(r"^media/documents/\d+/[0-9a-f]{32}\.(pdf|xlsx|xls|csv|md|docx)$")
TERMINAL_WITHIN_SECONDS = 60


@pytest.fixture
def sandbox_dirs(settings, tmp_path: Path, monkeypatch) -> Path:
    """MEDIA_ROOT, Django's upload temp dir and Python's temp dir, all inside tmp_path, and
    every upload streamed to a temp file (no in-memory shortcut), so each write is seen."""
    for name in ("media", "uploads", "tmp"):
        (tmp_path / name).mkdir()
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "uploads")
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path


def _upload(client, agent, item: Hostile, django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    url = reverse("datasets:upload", args=[agent.pk])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(url, {"name": f"Hostile {item.id}", "file": upload(item.filename, item.data)})
    return response, callbacks


def _settle(dataset: Dataset) -> float:
    """Run the extraction job as a worker would (the task itself, applied here); its duration."""
    started = time.monotonic()
    result = dataset_extract_task.apply(kwargs={"dataset_id": dataset.pk})
    assert result.successful(), f"the extraction task raised: {result.traceback}"
    dataset.refresh_from_db()
    if dataset.status == Dataset.Status.REVIEW:
        # The mapping step, confirmed as suggested (keeping the first 500), then the job again.
        dataset_mapping_confirm(dataset=dataset, chosen=None, keep_first=True)
        result = dataset_extract_task.apply(kwargs={"dataset_id": dataset.pk})
        assert result.successful(), f"the extraction task raised: {result.traceback}"
    return time.monotonic() - started


def test_the_corpus_covers_the_issue_list():
    ids = {item.id for item in CORPUS}

    for needed in (
        "zip-bomb-xlsx", "zip-bomb-docx", "laughs-xlsx", "xxe-docx", "stray-cell-xfd1048576", "pdf-stream-1gb",
        "pdf-xref-prev-self", "pdf-xref-prev-pair", "truncated-pdf", "truncated-xlsx", "truncated-docx",
        "truncated-xls", "truncated-csv", "pdf-aes-user-password", "pdf-aes-owner-password-only", "pdf-image-only",
        "exe-as-pdf", "empty-pdf", "csv-cp1252", "csv-utf16", "csv-invalid-utf8", "csv-nul-bytes", "csv-ragged-rows",
        "csv-formula-injection", "csv-xss", "csv-100kb-cells",
    ):  # fmt: skip
        assert needed in ids
    assert all(len(item.data) <= 10_000_000 for item in CORPUS), (
        "every file must pass the size limit to test its content"
    )


@pytest.mark.parametrize("item", CORPUS, ids=lambda item: item.id)
def test_every_hostile_file_settles_safely(
    client_alice, agent, item, sandbox_dirs, no_llm, django_capture_on_commit_callbacks
):
    before = files_under(sandbox_dirs)

    response, callbacks = _upload(client_alice, agent, item, django_capture_on_commit_callbacks)

    assert response.status_code in (200, 302), f"the upload answered {response.status_code}"
    dataset = Dataset.objects.filter(agent=agent).first()
    pages = {"upload": response}
    if item.outcome == REFUSED:
        assert response.status_code == 200 and dataset is None, "a refused file must not become a dataset"
        assert item.says in html.unescape(response.content.decode()), "the form must say why"
        assert callbacks == [] and Document.objects.count() == 0
    else:
        assert response.status_code == 302 and dataset is not None, f"refused: {_form_errors(response)}"
        assert len(callbacks) == 1, "one extraction job is queued on commit"
        assert _settle(dataset) < TERMINAL_WITHIN_SECONDS
        dataset.refresh_from_db()
        assert dataset.status == item.outcome, f"{dataset.status}: {dataset.failure_reason or dataset.notice}"
        if item.outcome == FAILED:
            assert item.says in dataset.failure_reason
            assert LEAK.search(dataset.failure_reason) is None, dataset.failure_reason
            assert dataset.cases.count() == 0
        if item.outcome == READY:
            _assert_cases(dataset, item)
    pages.update(read_dataset_pages(client_alice, dataset, agent.pk))

    assert_no_leaks(pages)
    assert_database_clean()
    if dataset is not None:
        detail = body(pages["datasets:detail"])
        if item.outcome == FAILED:
            assert escape(dataset.failure_reason) in detail
        _assert_download_is_the_original(pages, item)
        _assert_markup_stays_text(pages, dataset)
    _assert_written_only_to_media(before, files_under(sandbox_dirs), sandbox_dirs)


def test_an_html_pdf_polyglot_never_renders_as_a_page(client_alice, agent, sandbox_dirs, no_llm):
    """It passes as a PDF (the header is there), so the preview frame may load it: as a PDF,
    sandboxed into an opaque origin, never sniffed into HTML (check 8 in docs/architecture.md)."""
    client_alice.post(
        reverse("datasets:upload", args=[agent.pk]),
        {"name": "Polyglot", "file": upload("polyglot.pdf", html_pdf_polyglot())},
    )
    document = Document.objects.get()

    response = client_alice.get(reverse("datasets:document_view", args=[agent.pk, document.dataset_id, document.pk]))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"].startswith("sandbox")
    assert response["Content-Disposition"].startswith("inline")


def _assert_cases(dataset: Dataset, item: Hostile) -> None:
    cases = list(dataset.cases.all())
    if item.cases is not None:
        assert len(cases) == item.cases, [case.question[:60] for case in cases]
    else:
        assert cases, "a Ready dataset has cases"
    texts = "\n".join(f"{c.question}\n{c.expected_answer}\n{c.document_context}" for c in cases)
    for expected in item.contains:
        assert expected in texts, f"{expected!r} did not arrive verbatim"
    shown = [f"{item['where']}: {item['message']}" for item in dataset.warnings]
    for start in item.warns:
        assert any(warning.startswith(start) for warning in shown), f"no warning {start!r} in {shown}"
    # A 100 KB cell is kept whole (issue 13 sec. 4); nothing is ever over the database's limit.
    assert all(len(c.question) <= 200_000 and len(c.expected_answer) <= 200_000 for c in cases)


def _assert_download_is_the_original(pages: dict, item: Hostile) -> None:
    download = pages["datasets:document_download"]
    assert download.status_code == 200
    assert download["Content-Disposition"].startswith("attachment")
    assert raw(download) == item.data


def _assert_markup_stays_text(pages: dict, dataset: Dataset) -> None:
    """Payloads that reached the cases are shown escaped on every HTML page, never as markup."""
    stored = "\n".join(TestCase.objects.filter(dataset=dataset).values_list("question", flat=True))
    payloads = [payload for payload in XSS_PAYLOADS if "<" in payload and payload in stored]
    for name, response in pages.items():
        if not response.get("Content-Type", "").startswith("text/html"):
            continue
        text = body(response)
        for payload in payloads:
            assert payload not in text, f"{name} renders {payload!r} as markup"
    if payloads:
        assert escape(payloads[0]) in body(pages["datasets:detail"])


def _assert_written_only_to_media(before: set[Path], after: set[Path], root: Path) -> None:
    new = sorted(str(path.relative_to(root)) for path in after - before)
    assert all(STORED_NAME.match(name) for name in new), f"written outside MEDIA_ROOT or under a user's name: {new}"
    assert not any((root / "uploads").iterdir()), "an upload temp file was left behind"
    assert not any((root / "tmp").iterdir()), "something wrote to the temp directory"


def _form_errors(response) -> str:  # type: ignore[no-untyped-def]
    found = re.findall(r'class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode(), re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", " ".join(found))).strip()
