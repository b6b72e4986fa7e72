"""The document preview opened from a case marks the case's source: the sheet row and cell,
the Markdown lines, the Word paragraphs, the text on a PDF page (escaped like the rest)."""

import re

import pytest
from django.urls import reverse

from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401 - fixture
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def owner_agent(team):
    return AgentFactory(team=team)


def _preview(client, case, **params):
    document = case.source_document
    url = reverse("datasets:document_preview", args=[case.dataset.agent_id, case.dataset_id, document.pk])
    query = "&".join(f"{key}={value}" for key, value in {"case": case.pk, **params}.items())
    return client.get(f"{url}?{query}", **HTMX).content.decode()


def test_the_xlsx_preview_marks_the_cases_row_and_question_cell_in_its_sheet(client_alice, owner_agent, no_llm):
    data = files.xlsx_bytes(
        {
            "Intro": [["Release 3.2 plan"]],
            "Billing": [
                ["Question", "Expected answer"],
                ["Can I pay by invoice?", "Yes, on Business."],
                ["<b>Refund</b> after 40 days?", "No."],
            ],
        }
    )
    dataset = extract(owner_agent, "plan.xlsx", data)
    case = dataset.cases.get(source_location="Billing row 3")

    html = _preview(client_alice, case)

    rows = re.findall(r'<tr class="is-source"[^>]*>(.*?)</tr>', html, re.S)
    assert len(rows) == 1
    assert '<td class="is-source-cell">&lt;b&gt;Refund&lt;/b&gt; after 40 days?</td>' in rows[0]
    assert "<b>Refund" not in html


def test_the_markdown_preview_marks_the_lines_of_a_labelled_case(client_alice, owner_agent, no_llm):
    text = (
        b"# Plan\n\nQuestion: First?\nExpected answer: One.\n\n"
        b"Question: Second question that is\nwrapped?\nExpected answer: Two.\n\n## Next\n"
    )
    dataset = extract(owner_agent, "plan.md", text)
    case = dataset.cases.get(question="Second question that is wrapped?")
    assert case.source_location == "line 6"

    html = _preview(client_alice, case)

    marked = re.findall(
        r'<span class="preview-line is-source-text" data-source-mark><span class="line-number" aria-hidden="true">'
        r"\d+</span>(.*?)</span>",
        html,
    )
    assert marked == [
        "Question: Second question that is",
        "wrapped?",
        "Expected answer: Two.",
    ]


def test_the_pdf_page_text_marks_the_evidence_span(client_alice, owner_agent, no_llm):
    pages = [
        ["Intro page"],
        [
            "Q1: Is support open on Sunday?",
            "Expected answer: No.",
            "Q2: What about <Saturday>?",
            "Expected answer: Also no.",
        ],
    ]
    dataset = extract(owner_agent, "plan.pdf", files.pdf_bytes(pages))
    case = dataset.cases.get(question="What about <Saturday>?")

    viewer = _preview(client_alice, case)
    assert "#page=2" in viewer and "Page 2 text" in viewer
    assert 'class="source-callout"' in viewer and "Q2: What about &lt;Saturday&gt;?" in viewer

    html = _preview(client_alice, case, show="text")
    marked = re.findall(r'<mark class="source-mark" id="source-mark" data-source-mark>(.*?)</mark>', html, re.S)
    assert marked == ["Q2: What about &lt;Saturday&gt;?\nExpected answer: Also no."]
    assert "Q1: Is support open on Sunday?" in html


def test_the_word_preview_marks_the_paragraphs_of_the_case(client_alice, owner_agent, no_llm):
    data = files.docx_bytes(
        ["Plan", "Question: First?", "Expected answer: One.", "Question: Second?", "Expected answer: Two."]
    )
    dataset = extract(owner_agent, "plan.docx", data)
    case = dataset.cases.get(question="Second?")

    html = _preview(client_alice, case)

    assert re.findall(r'<p class="is-source-text" data-source-mark>(.*?)</p>', html) == [
        "Question: Second?",
        "Expected answer: Two.",
    ]
