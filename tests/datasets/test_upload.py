"""The Generate Dataset page and its upload: validation before any work, nothing stored when refused."""

import re

import pytest
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from django.urls import reverse

from datasets.models import Dataset, Document
from tests.datasets import files
from tests.datasets.extraction_helpers import media_root, stored_files  # noqa: F401

pytestmark = pytest.mark.django_db

STORED_NAME = re.compile(r"^documents/\d+/[0-9a-f]{32}\.(pdf|xlsx|xls|csv|md|docx)$")


class RecordingTempFileHandler(TemporaryFileUploadHandler):
    """Django's temp-file handler, noting every file it starts writing to disk."""

    started: list[str] = []

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        RecordingTempFileHandler.started.append(self.file_name)


@pytest.fixture
def temp_files(settings, tmp_path):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    settings.FILE_UPLOAD_HANDLERS = [f"{__name__}.RecordingTempFileHandler"]
    RecordingTempFileHandler.started = []
    return RecordingTempFileHandler.started


def new_url(agent) -> str:
    return reverse("datasets:new", args=[agent.pk])


def upload_url(agent) -> str:
    return reverse("datasets:upload", args=[agent.pk])


def post_upload(
    client, agent, name: str, data: bytes, *, dataset_name: str = "Support plan", agent_reads_source: str = "", **extra
):
    fields = {"name": dataset_name, "file": files.upload(name, data)}
    if agent_reads_source:
        fields["agent_reads_source"] = agent_reads_source
    return client.post(upload_url(agent), fields, **extra)


# ---- the page ---------------------------------------------------------------------


def test_page_shows_both_steps_the_tabs_and_the_limits(client_alice, agent):
    response = client_alice.get(new_url(agent))

    assert response.status_code == 200
    html = response.content.decode()
    for text in (
        "Generate Dataset",
        "Test Data &amp; Cases",
        "Review &amp; Generate",
        "Upload file",
        "Generate with AI",
        ".pdf, .xlsx, .xls, .md, .csv or .docx",
        "up to 10 MB",
        "Decided by the document",
    ):
        assert text in html
    assert 'accept=".pdf,.xlsx,.xls,.md,.csv,.docx"' in html
    assert f'action="{upload_url(agent)}"' in html and 'enctype="multipart/form-data"' in html


def test_generate_tab_holds_the_generation_include(client_alice, agent):
    response = client_alice.get(new_url(agent) + "?tab=generate")

    assert response.status_code == 200
    assert "Generate with AI" in response.content.decode()
    assert "upload-form" not in response.content.decode()


def test_page_is_404_for_outsiders_and_redirects_anonymous_users(client_charlie, client, agent):
    assert client_charlie.get(new_url(agent)).status_code == 404
    response = client.get(new_url(agent))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_page_refuses_post(client_alice, agent):
    assert client_alice.post(new_url(agent)).status_code == 405


# ---- uploading --------------------------------------------------------------------


def test_upload_creates_an_extracting_dataset_with_its_document_and_queues_the_job(
    client_alice,
    alice,
    agent,
    media_root,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    data = files.xlsx_bytes({"Cases": [["Question", "Answer"], ["Hi?", "Hello"]]})

    with django_capture_on_commit_callbacks() as callbacks:
        response = post_upload(client_alice, agent, "Test plan.xlsx", data)

    dataset = Dataset.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:detail", args=[agent.pk, dataset.pk])
    assert (dataset.name, dataset.status, dataset.source, dataset.source_name) == (
        "Support plan",
        "extracting",
        "upload",
        "Test plan.xlsx",
    )
    assert dataset.created_by == alice
    document = dataset.documents.get()
    assert (document.original_name, document.file_type, document.size, document.team) == (
        "Test plan.xlsx",
        "xlsx",
        len(data),
        agent.team,
    )
    assert len(document.sha256) == 64
    assert STORED_NAME.match(document.file.name)
    assert (media_root / document.file.name).read_bytes() == data
    assert len(callbacks) == 1  # the extraction job, sent only once the transaction commits


def test_htmx_upload_answers_with_a_client_redirect(client_alice, agent):
    response = post_upload(client_alice, agent, "cases.csv", b"Question,Answer\nHi?,Hello\n", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("datasets:detail", args=[agent.pk, Dataset.objects.get().pk])


def test_htmx_upload_errors_re_render_only_the_form(client_alice, agent):
    response = post_upload(client_alice, agent, "cases.csv", b"", HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith("<form") and "<html" not in html
    assert "The submitted file is empty." in html


def test_an_11_mb_upload_is_refused_with_a_readable_message_and_nothing_is_stored(
    client_alice,
    agent,
    media_root,  # noqa: F811
    temp_files,
    django_capture_on_commit_callbacks,
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = post_upload(client_alice, agent, "huge.csv", b"a" * (11 * 1024 * 1024))

    assert response.status_code == 200
    assert "The file is 11.5 MB; the limit is 10 MB." in response.content.decode()
    assert Dataset.objects.count() == 0 and callbacks == []
    assert stored_files(media_root) == []
    assert temp_files == []  # not even a temporary file was started


def test_a_file_of_exactly_10_000_000_bytes_is_accepted(client_alice, agent, temp_files, settings):
    settings.EVALSITE_LLM_MODEL = "openai/any-model"  # prose is read by a model: without one it is refused
    head = b"# Support notes\n\nRefunds are available within 30 days.\n\n"
    data = head + b"x" * (10_000_000 - len(head))

    response = post_upload(client_alice, agent, "notes.md", data)

    assert response.status_code == 302
    assert Dataset.objects.get().documents.get().size == 10_000_000


def test_a_file_just_over_the_limit_is_refused(client_alice, agent, media_root):  # noqa: F811
    response = post_upload(client_alice, agent, "notes.md", b"x" * 10_000_001)

    assert "The file is 10.0 MB; the limit is 10 MB." in response.content.decode()
    assert Dataset.objects.count() == 0 and stored_files(media_root) == []


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("invoice.pdf", files.pe_executable(), "named .pdf but it is not a PDF (it looks like a Windows program)"),
        (
            "plan.xlsx",
            files.pdf_bytes([["hello"]]),
            "named .xlsx but it is not an Excel workbook (it looks like a PDF)",
        ),
        ("plan.docx", files.plain_zip(), "it is a zip archive, not a Word document"),
        ("plan.xlsx", files.plain_zip(), "it is a zip archive, not an Excel workbook"),
        ("cases.csv", files.pe_executable(), "it is a Windows program"),
        ("empty.pdf", b"", "The submitted file is empty."),
        ("script.exe", b"MZ...", ".exe files are not supported"),
        ("noextension", b"hello", "This kind of file is not supported"),
    ],
)
def test_wrong_content_is_refused_before_any_task_is_queued(
    client_alice,
    agent,
    media_root,  # noqa: F811
    django_capture_on_commit_callbacks,
    name,
    data,
    message,  # noqa: F811
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = post_upload(client_alice, agent, name, data)

    assert response.status_code == 200
    assert message in response.content.decode()
    assert Dataset.objects.count() == 0 and Document.objects.count() == 0
    assert callbacks == [] and stored_files(media_root) == []


def test_zip_bombs_and_xml_entity_files_are_refused_at_upload(client_alice, agent, media_root):  # noqa: F811
    bomb = post_upload(client_alice, agent, "bomb.xlsx", files.zip_bomb_xlsx())
    xxe = post_upload(client_alice, agent, "xxe.docx", files.entity_docx(files.XXE_DOCTYPE, "xxe"))

    assert "zip bomb" in bomb.content.decode()
    assert "XML entity declarations" in xxe.content.decode()
    assert Dataset.objects.count() == 0 and stored_files(media_root) == []


def test_a_password_protected_xlsx_is_refused_with_what_to_do(client_alice, agent):
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 500 + "EncryptionInfo".encode("utf-16-le") + b"\x00" * 500

    response = post_upload(client_alice, agent, "locked.xlsx", ole)

    assert "password-protected" in response.content.decode()


@pytest.mark.parametrize(
    "hostile",
    [
        "../../../../etc/cron.d/evil.md",
        "..\\..\\windows\\evil.md",
        "%2e%2e%2f%2e%2e%2fevil.md",
        "nul\x00byte.md",
        "crlf\r\nSet-Cookie: owned=1.md",
        "CON.md",
        "a" * 300 + ".md",
        "<script>alert(1)</script>.md",
    ],
)
def test_hostile_file_names_never_leave_media_root_and_stored_names_are_server_made(
    client_alice,
    agent,
    media_root,  # noqa: F811
    hostile,  # noqa: F811
):
    response = post_upload(client_alice, agent, hostile, b"# Notes\n\nQuestion: Hi?\nAnswer: Hello\n")

    assert response.status_code in (200, 302)
    for path in stored_files(media_root):
        assert path.resolve().is_relative_to(media_root.resolve())
    for document in Document.objects.all():
        assert STORED_NAME.match(document.file.name)
        assert not any(ch in document.original_name for ch in "/\\\x00\r\n<>")
        assert len(document.original_name) <= 120
        download = client_alice.get(
            reverse("datasets:document_download", args=[agent.pk, document.dataset_id, document.pk])
        )
        assert all("\r" not in value and "\n" not in value for _, value in download.items())
        assert "owned" not in download.cookies


def test_name_is_required_and_at_most_120_characters(client_alice, agent):
    missing = post_upload(client_alice, agent, "cases.csv", b"Question\nHi?\n", dataset_name="")
    too_long = post_upload(client_alice, agent, "cases.csv", b"Question\nHi?\n", dataset_name="n" * 121)

    assert "Give the dataset a name." in missing.content.decode()
    assert "at most 120 characters" in too_long.content.decode()
    assert Dataset.objects.count() == 0


def test_a_name_the_agent_already_uses_is_refused_and_the_file_is_not_kept(client_alice, agent, media_root):  # noqa: F811
    Dataset.objects.create(agent=agent, name="Support plan")

    response = post_upload(client_alice, agent, "cases.csv", b"Question\nHi?\n")

    assert "already has a dataset named" in response.content.decode()
    assert Document.objects.count() == 0 and stored_files(media_root) == []


def test_upload_needs_a_csrf_token(alice, agent):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    response = post_upload(client, agent, "cases.csv", b"Question\nHi?\n")

    assert response.status_code == 403
    assert Dataset.objects.count() == 0


def test_upload_is_404_for_outsiders_405_for_get_and_redirects_anonymous_users(
    client_charlie, client_alice, client, agent
):
    assert post_upload(client_charlie, agent, "cases.csv", b"Question\nHi?\n").status_code == 404
    assert client_alice.get(upload_url(agent)).status_code == 405
    anonymous = post_upload(client, agent, "cases.csv", b"Question\nHi?\n")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert Dataset.objects.count() == 0


def test_teammates_can_upload_to_the_teams_agent(client_bob, agent):
    assert post_upload(client_bob, agent, "cases.csv", b"Question\nHi?\n").status_code == 302


# ---- the uploaded file: source, and the agent's input only when asked ---------------------


def test_the_upload_is_not_the_agents_input_unless_the_team_says_so(client_alice, agent):
    data = files.xlsx_bytes({"Cases": [["Question", "Answer"], ["Hi?", "Hello"]]})
    post_upload(client_alice, agent, "plan.xlsx", data)
    post_upload(client_alice, agent, "contract.xlsx", data, dataset_name="Contract", agent_reads_source="on")
    assert dict(Dataset.objects.values_list("name", "agent_reads_source")) == {"Support plan": False, "Contract": True}


def test_the_review_step_offers_the_choice_off_with_its_warning(client_alice, agent):
    html = client_alice.get(new_url(agent)).content.decode()
    checkbox = re.search(r'<input type="checkbox" name="agent_reads_source"[^>]*>', html)
    assert checkbox is not None and "checked" not in checkbox.group(0)
    assert "Let the agent read the uploaded document" in html
    assert "the agent then reads the expected answers too" in html


def test_a_refused_name_resumes_on_the_name_step_with_the_file_kept(client_alice, agent):
    from tests.factories import DatasetFactory

    DatasetFactory(agent=agent, name="Support plan")
    csv = b"question,expected_answer\nQ?,A.\n"
    response = post_upload(client_alice, agent, "plan.csv", csv, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert 'data-start-step="2"' in html
    assert re.search(r'<input type="file"[^>]*hx-preserve="true"', html)  # the browser keeps the chosen file
    assert re.search(r"<dd data-source-name>\s*plan\.csv\s*</dd>", html)
    assert 'id="name-errors"' in html
    # A file error goes back to the file step; a full page (no htmx) lost the file: both steps.
    assert 'data-start-step="1"' not in html
    bad = post_upload(client_alice, agent, "plan.csv", b"", dataset_name="Other", HTTP_HX_REQUEST="true")
    assert 'data-start-step="1"' in bad.content.decode()
    page = post_upload(client_alice, agent, "plan.csv", csv)
    assert 'data-start-step="all"' in page.content.decode()
