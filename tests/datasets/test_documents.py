"""Documents: downloads for the team only, the sandboxed PDF view, previews, and attachments on cases."""

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse

from datasets.models import Document
from tests.datasets import files
from tests.datasets.extraction_helpers import media_root, stored_files  # noqa: F401
from tests.factories import DatasetFactory, TestCaseFactory

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)> hx-get="/logout/" {{ 7*7 }}'


def make_document(dataset, name: str, data: bytes, file_type: str | None = None) -> Document:
    document = Document(
        team=dataset.agent.team,
        dataset=dataset,
        original_name=name,
        size=len(data),
        file_type=file_type or name.rsplit(".", 1)[-1],
        sha256=f"{len(data):064d}"[:64],
    )
    document.file.save("upload", ContentFile(data), save=True)
    return document


def url(name: str, document: Document) -> str:
    return reverse(f"datasets:{name}", args=[document.dataset.agent_id, document.dataset_id, document.pk])


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent, source="upload", source_name="plan.xlsx")


# ---- download ------------------------------------------------------------------------


def test_teammates_download_the_original_as_an_attachment(client_bob, dataset):
    data = files.xlsx_bytes({"Cases": [["Question"], ["Hi?"]]})
    document = make_document(dataset, "Q3 plan (final).xlsx", data)

    response = client_bob.get(url("document_download", document))

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == data
    assert response["Content-Disposition"].startswith("attachment;")
    assert "Q3 plan (final).xlsx" in response["Content-Disposition"]
    assert response["Content-Type"] == "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"].startswith("sandbox")


def test_download_is_404_for_outsiders_and_for_a_document_of_another_dataset(
    client_charlie, client_alice, client, agent, dataset
):
    document = make_document(dataset, "plan.csv", b"Question\nHi?\n")
    other = DatasetFactory(agent=agent)

    assert client_charlie.get(url("document_download", document)).status_code == 404
    wrong_dataset = reverse("datasets:document_download", args=[agent.pk, other.pk, document.pk])
    assert client_alice.get(wrong_dataset).status_code == 404
    assert client_alice.post(url("document_download", document)).status_code == 405
    assert client.get(url("document_download", document)).status_code == 302


# ---- the PDF view ------------------------------------------------------------------------


def test_a_pdf_opens_inline_sandboxed_for_the_preview_frame(client_alice, dataset):
    document = make_document(dataset, "policy.pdf", files.pdf_bytes([["Refunds within 30 days."]]))

    response = client_alice.get(url("document_view", document))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"].startswith("inline;")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "sandbox; frame-ancestors 'self'"
    assert response["X-Frame-Options"] == "SAMEORIGIN"


@pytest.mark.parametrize(
    "name, data, file_type",
    [
        ("plan.csv", b"Question\nHi?\n", None),
        ("fake.pdf", b"<html><script>alert(1)</script></html>", "pdf"),  # stored as a PDF without being one
    ],
)
def test_only_real_pdfs_are_ever_served_inline(client_alice, dataset, name, data, file_type):
    document = make_document(dataset, name, data, file_type)

    assert client_alice.get(url("document_view", document)).status_code == 404


def test_pdf_view_is_404_for_outsiders(client_charlie, dataset):
    document = make_document(dataset, "policy.pdf", files.pdf_bytes([["x"]]))

    assert client_charlie.get(url("document_view", document)).status_code == 404


# ---- preview ------------------------------------------------------------------------


def test_docx_preview_shows_paragraphs_and_tables_escaped(client_alice, dataset):
    data = files.docx_bytes(["Refund policy", HOSTILE, [["Question", "Expected answer"], ["Refund window?", HOSTILE]]])
    document = make_document(dataset, "policy.docx", data)

    response = client_alice.get(url("document_preview", document), HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith("<dialog data-autoopen")
    assert "<p>Refund policy</p>" in html and "<td>Refund window?</td>" in html
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "{{ 7*7 }}" in html and "49" not in html
    assert 'class="document-preview" hx-disable' in html  # htmx ignores attributes inside, as a second fence
    assert f'href="{url("document_download", document)}"' in html and "Open file" in html


def test_xlsx_preview_shows_the_first_sheets_with_capped_rows(client_alice, dataset):
    sheets = {f"Sheet {n}": [["Question", "Answer"], *files.qa_rows(3)] for n in range(1, 8)}
    sheets["Sheet 1"] = [["Question", "Answer"], *files.qa_rows(250)]
    document = make_document(dataset, "plan.xlsx", files.xlsx_bytes(sheets))

    html = client_alice.get(url("document_preview", document), HTTP_HX_REQUEST="true").content.decode()

    assert "Sheet 1" in html and "Sheet 5" in html and "Sheet 6</h3>" not in html
    assert "2 more sheets are in the file." in html
    assert "51 more rows are not shown." in html
    assert "Question number 199" in html and "Question number 200" not in html


def test_pdf_preview_embeds_the_browsers_viewer_at_the_cases_page(client_alice, dataset):
    document = make_document(dataset, "policy.pdf", files.pdf_bytes([["a"], ["b"], ["c"]]))
    case = TestCaseFactory(dataset=dataset, source_location="page 3", document_context="Refunds within 30 days.")
    case.documents.add(document)

    html = client_alice.get(
        url("document_preview", document) + f"?case={case.pk}", HTTP_HX_REQUEST="true"
    ).content.decode()

    assert f'<iframe class="pdf-frame" title="policy.pdf" src="{url("document_view", document)}#page=3"' in html
    assert "Show preview" in html and "Show context" in html


def test_show_context_shows_the_cases_document_context_and_source(client_alice, dataset):
    document = make_document(dataset, "plan.csv", b"Question\nHi?\n")
    case = TestCaseFactory(
        dataset=dataset, source_location="row 2", document_context=HOSTILE, source_span="Question: Hi?"
    )
    case.documents.add(document)

    response = client_alice.get(
        url("document_preview", document) + f"?case={case.pk}&show=context", HTTP_HX_REQUEST="true"
    )

    html = response.content.decode()
    assert "From row 2 of plan.csv" in html and "Question: Hi?" in html
    assert "&lt;script&gt;" in html and "<script>alert" not in html
    assert 'aria-current="page">Show context' in html


def test_a_broken_file_gets_a_preview_message_not_an_error_page(client_alice, dataset):
    document = make_document(dataset, "broken.xlsx", b"PK\x03\x04 not really a zip")

    response = client_alice.get(url("document_preview", document), HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    html = response.content.decode()
    assert "The preview could not be shown" in html and "Open file" in html
    assert "Traceback" not in html and "Error" not in html


def test_without_htmx_the_preview_is_a_page(client_alice, dataset):
    document = make_document(dataset, "notes.md", b"# Notes\n\n" + HOSTILE.encode())

    html = client_alice.get(url("document_preview", document)).content.decode()

    assert "<html" in html and "<dialog" not in html
    assert "&lt;script&gt;" in html and "Open file" in html


def test_preview_is_404_for_outsiders_405_for_post_and_redirects_anonymous_users(
    client_charlie, client_alice, client, dataset
):
    document = make_document(dataset, "notes.md", b"# Notes")

    assert client_charlie.get(url("document_preview", document)).status_code == 404
    assert client_alice.post(url("document_preview", document)).status_code == 405
    assert client.get(url("document_preview", document)).status_code == 302


# ---- documents on manual cases ----------------------------------------------------------


def attach_url(case) -> str:
    return reverse("datasets:case_document_attach", args=[case.dataset.agent_id, case.dataset_id, case.pk])


def test_a_manual_case_gets_a_document_attached(client_alice, dataset, media_root):  # noqa: F811
    case = TestCaseFactory(dataset=dataset)

    response = client_alice.post(
        attach_url(case),
        {"file": files.upload("invoice.pdf", files.pdf_bytes([["Total: 12 EUR"]]))},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    document = case.documents.get()
    assert (document.original_name, document.file_type, document.dataset) == ("invoice.pdf", "pdf", dataset)
    html = response.content.decode()
    assert "invoice.pdf" in html and f'id="case-documents-{case.pk}"' in html
    assert "casesChanged" in response["HX-Trigger"]
    assert len(stored_files(media_root)) == 1


def test_attachments_get_the_same_checks_as_uploads(client_alice, dataset, media_root):  # noqa: F811
    case = TestCaseFactory(dataset=dataset)

    response = client_alice.post(
        attach_url(case), {"file": files.upload("invoice.pdf", files.pe_executable())}, HTTP_HX_REQUEST="true"
    )

    assert "not a PDF" in response.content.decode()
    assert case.documents.count() == 0 and stored_files(media_root) == []


def test_without_htmx_attaching_redirects_back_with_a_message(client_alice, dataset):
    case = TestCaseFactory(dataset=dataset)

    response = client_alice.post(attach_url(case), {"file": files.upload("notes.md", b"# Notes")}, follow=True)

    assert response.redirect_chain[-1][0] == reverse("datasets:detail", args=[dataset.agent_id, dataset.pk])
    assert "Attached notes.md." in response.content.decode()


def test_removing_a_manual_attachment_deletes_it_but_the_source_file_stays(
    client_alice,
    dataset,
    media_root,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    source = make_document(dataset, "plan.xlsx", files.xlsx_bytes({"S": [["Question"], ["Hi?"]]}))
    case = TestCaseFactory(dataset=dataset)
    case.documents.add(source)
    client_alice.post(attach_url(case), {"file": files.upload("extra.md", b"# Extra")})
    extra = case.documents.get(original_name="extra.md")

    for document in (extra, source):
        remove = reverse("datasets:case_document_detach", args=[dataset.agent_id, dataset.pk, case.pk, document.pk])
        with django_capture_on_commit_callbacks(execute=True):
            assert client_alice.post(remove, HTTP_HX_REQUEST="true").status_code == 200

    assert case.documents.count() == 0
    assert list(Document.objects.values_list("original_name", flat=True)) == ["plan.xlsx"]
    assert len(stored_files(media_root)) == 1


def test_attachments_are_404_for_outsiders_405_for_get_and_redirect_anonymous_users(
    client_charlie, client_alice, client, dataset
):
    case = TestCaseFactory(dataset=dataset)
    upload = {"file": files.upload("notes.md", b"# Notes")}

    assert client_charlie.post(attach_url(case), upload).status_code == 404
    assert client_alice.get(attach_url(case)).status_code == 405
    assert client.post(attach_url(case), {"file": files.upload("notes.md", b"# Notes")}).status_code == 302
    assert case.documents.count() == 0
