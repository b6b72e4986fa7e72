"""Hostile multipart file names, sent byte for byte (check 7 in docs/architecture.md).

Django's test client strips a file name to its basename before sending it, so these
tests write the multipart body themselves: the server sees `../`, `..\\`, NUL, CRLF
(RFC 2231 `filename*`), reserved device names and 300 characters exactly as an
attacker's client would send them. Through every way a file comes in (a dataset
upload, a document attached to a case, a new dataset from a CSV): no 5xx, nothing
written outside MEDIA_ROOT, stored names made by the server, the names shown and sent
back in headers cleaned of paths, controls and markup.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from django.urls import reverse

from datasets.models import Dataset, Document
from tests.factories import DatasetFactory, TestCaseFactory
from tests.hostile.pages import assert_no_leaks, body, files_under

pytestmark = pytest.mark.django_db

BOUNDARY = "----EvalsiteHostileBoundary7MA4YWxkTrZu0gW"
STORED_NAME = re.compile(r"^media/documents/\d+/[0-9a-f]{32}\.(md|csv)$")
MARKDOWN = b"# Notes\n\nQuestion: Is this stored safely?\nAnswer: Yes\n\nQuestion: Twice?\nAnswer: Yes\n"
CSV = b"question,expected_answer\nIs this stored safely?,Yes\n"
# The Content-Disposition parameter carrying the name, {ext} being the file type.
HOSTILE_NAMES = {
    "traversal": b'filename="../../../../../../etc/cron.d/evil.{ext}"',
    "windows-traversal": b'filename="..\\..\\..\\..\\windows\\system32\\evil.{ext}"',
    "absolute": b'filename="/etc/passwd.{ext}"',
    "unc-path": b'filename="\\\\attacker\\share\\evil.{ext}"',
    "url-encoded-traversal": b'filename="%2e%2e%2f%2e%2e%2f%2e%2e%2fevil.{ext}"',
    "rfc2231-traversal": b"filename*=UTF-8''..%2F..%2F..%2F..%2Fevil.{ext}",
    "nul-byte": b'filename="evil\x00.{ext}"',
    "rfc2231-nul": b"filename*=UTF-8''evil%00.exe%00.{ext}",
    "rfc2231-crlf": b"filename*=UTF-8''report%0D%0ASet-Cookie%3A%20owned%3D1%0D%0AX-Injected%3A%201%0D%0A.{ext}",
    "device-name": b'filename="CON.{ext}"',
    "device-name-with-dots": b'filename="lpt1...{ext}"',
    "300-characters": b'filename="' + b"a" * 300 + b'.{ext}"',
    "only-dots": b'filename="...{ext}"',
    "right-to-left-override": b"filename*=UTF-8''invoice%E2%80%AEfdp.{ext}",
    "markup": b'filename="<img src=x onerror=alert(1)>{{ 7*7 }}.{ext}"',
}
SANITISED_OUT = ("/", "\\", "\x00", "\r", "\n", "<", ">", "\u202e", "..")


def multipart(fields: dict[str, str], disposition: bytes, data: bytes) -> bytes:
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f"--{BOUNDARY}\r\n".encode()
        + b'Content-Disposition: form-data; name="file"; '
        + disposition
        + b"\r\nContent-Type: application/octet-stream\r\n\r\n"
        + data
        + b"\r\n"
    )
    parts.append(f"--{BOUNDARY}--\r\n".encode())
    return b"".join(parts)


@pytest.fixture
def sandbox_dirs(settings, tmp_path: Path, monkeypatch) -> Path:
    for name in ("media", "uploads", "tmp"):
        (tmp_path / name).mkdir()
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "uploads")
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # every upload passes through a temp file we can watch
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path


def _post(client, url: str, fields: dict[str, str], disposition: bytes, data: bytes, *, htmx: bool):  # type: ignore[no-untyped-def]
    return client.generic(
        "POST",
        url,
        multipart(fields, disposition, data),
        content_type=f"multipart/form-data; boundary={BOUNDARY}",
        headers={"HX-Request": "true"} if htmx else {},
    )


def _assert_clean_name(name: str) -> None:
    assert name and len(name) <= 120, name
    assert not any(bad in name for bad in SANITISED_OUT), repr(name)
    assert name.split(".")[0].lower() not in {"con", "prn", "aux", "nul", "lpt1", "com1"}, name


def _assert_nothing_escaped(before: set[Path], root: Path) -> None:
    new = sorted(str(path.relative_to(root)) for path in files_under(root) - before)
    assert all(STORED_NAME.match(name) for name in new), f"written outside MEDIA_ROOT or under a user's name: {new}"
    assert not any((root / "uploads").iterdir()) and not any((root / "tmp").iterdir())
    for target in ("/etc/cron.d/evil.md", "/etc/passwd.md", "/etc/cron.d/evil.csv", "/etc/passwd.csv"):
        assert not Path(target).exists()
    assert not [path for path in root.parent.rglob("evil*") if path.is_file()]


def _assert_download_headers_clean(client, document: Document, agent_id: int) -> None:  # type: ignore[no-untyped-def]
    url = reverse("datasets:document_download", args=[agent_id, document.dataset_id, document.pk])
    response = client.get(url)
    assert response.status_code == 200
    for name, value in response.items():
        assert "\r" not in value and "\n" not in value, (name, value)
    assert "X-Injected" not in response and "owned" not in response.cookies


@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=str)
def test_a_dataset_upload_keeps_the_file_inside_media_under_a_server_name(
    client_alice, agent, sandbox_dirs, name, htmx
):
    before = files_under(sandbox_dirs)
    disposition = HOSTILE_NAMES[name].replace(b"{ext}", b"md")

    response = _post(
        client_alice, reverse("datasets:upload", args=[agent.pk]), {"name": f"Upload {name}"}, disposition, MARKDOWN,
        htmx=htmx,
    )  # fmt: skip

    assert response.status_code == (200 if htmx else 302), "the name is cleaned, the file accepted"
    assert not htmx or "HX-Redirect" in response
    _assert_nothing_escaped(before, sandbox_dirs)
    assert Document.objects.count() == 1
    for document in Document.objects.all():
        _assert_clean_name(document.original_name)
        _assert_clean_name(document.dataset.source_name)
        _assert_download_headers_clean(client_alice, document, agent.pk)
        detail = client_alice.get(reverse("datasets:detail", args=[agent.pk, document.dataset_id]))
        assert_no_leaks({"detail": detail})
        assert "<img src=x onerror" not in body(detail)
    assert_no_leaks({"upload": response})


@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=str)
def test_a_document_attached_to_a_case_keeps_inside_media_under_a_server_name(
    client_alice, agent, sandbox_dirs, name, htmx
):
    case = TestCaseFactory(dataset=DatasetFactory(agent=agent))
    url = reverse("datasets:case_document_attach", args=[agent.pk, case.dataset_id, case.pk])
    before = files_under(sandbox_dirs)

    response = _post(client_alice, url, {}, HOSTILE_NAMES[name].replace(b"{ext}", b"md"), MARKDOWN, htmx=htmx)

    assert response.status_code in (200, 302)
    for header, value in response.items():  # the toast names the file, inside HX-Trigger
        assert "\r" not in value and "\n" not in value, (header, value)
    assert "<img src=x onerror" not in body(response)
    _assert_nothing_escaped(before, sandbox_dirs)
    assert case.documents.count() == 1, "the name is cleaned, the file attached"
    for document in case.documents.all():
        _assert_clean_name(document.original_name)
        _assert_download_headers_clean(client_alice, document, agent.pk)
    assert_no_leaks({"attach": response})


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=str)
def test_a_dataset_named_after_a_hostile_csv_file_gets_a_clean_name(client_alice, agent, sandbox_dirs, name):
    before = files_under(sandbox_dirs)

    response = _post(
        client_alice, reverse("datasets:create", args=[agent.pk]), {"name": ""},
        HOSTILE_NAMES[name].replace(b"{ext}", b"csv"), CSV, htmx=True,
    )  # fmt: skip

    assert response.status_code == 200 and "HX-Redirect" in response, "the name is cleaned, the dataset made"
    _assert_nothing_escaped(before, sandbox_dirs)
    assert Dataset.objects.filter(agent=agent).count() == 1
    for dataset in Dataset.objects.filter(agent=agent):
        assert dataset.name and len(dataset.name) <= 120
        assert not any(ch in dataset.name for ch in ("/", "\\", "\x00", "\r", "\n")), repr(dataset.name)
        export = client_alice.get(reverse("datasets:export_csv", args=[agent.pk, dataset.pk]))
        for header, value in export.items():
            assert "\r" not in value and "\n" not in value, (header, value)
    assert_no_leaks({"create": response})


def test_the_test_body_really_carries_the_hostile_name(rf):
    """Guard for the suite itself: Django's parser receives the name as sent, before any cleaning."""
    from django.http.multipartparser import MultiPartParser

    data = multipart({}, HOSTILE_NAMES["rfc2231-crlf"].replace(b"{ext}", b"md"), MARKDOWN)
    request = rf.generic("POST", "/", data, content_type=f"multipart/form-data; boundary={BOUNDARY}")
    parser = MultiPartParser(request.META, request, request.upload_handlers)
    parser.sanitize_file_name = lambda file_name: file_name  # see the raw value Django starts from

    _, files = parser.parse()

    assert files["file"].name == "report\r\nSet-Cookie: owned=1\r\nX-Injected: 1\r\n.md"
