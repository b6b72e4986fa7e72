"""Prose documents: labelled Q/A lists without a model, everything else through the model in chunks."""

import json

import pytest

from datasets.models import Dataset, Document, TestCase
from datasets.services import dataset_delete
from tests.datasets import files
from tests.datasets.extraction_helpers import case_rows, extract, media_root, stored_files, uploaded_dataset  # noqa: F401

pytestmark = pytest.mark.django_db

POLICY_PAGES = [
    ["Acme Cloud customer policy", "Chapter 1: Billing", "Invoices are sent on the first day of each month."],
    ["Chapter 2: Refunds", "Refunds are available within 30 days of purchase.", "After 30 days no refund is possible."],
    ["Chapter 3: Support", "Support is open 9-17 CET on weekdays."],
]


def model_cases(*cases: dict) -> dict:
    return {"cases": list(cases)}


def test_prose_pdf_becomes_cases_through_the_model_with_page_provenance(agent, fake_llm):
    fake_llm.add_rule(
        task="extract",
        json=model_cases(
            # The model claims page 1, but the span is on page 2: the page comes from the text.
            {
                "question": "Can I get a refund after 20 days?",
                "expected_answer": "Yes, within 30 days of purchase.",
                "source_span": "Refunds are available within 30 days of purchase.",
                "page": 1,
                "tests_rule": "Refund window",
            },
            {
                "question": "When is support open?",
                "expected_answer": "9-17 CET on weekdays.",
                "source_span": "Support is open 9-17 CET on weekdays.",
                "page": 3,
            },
            # A near-duplicate of the first question is dropped.
            {
                "question": "Can I get a refund after 20 days ?",
                "expected_answer": "Yes.",
                "source_span": "Refunds are available within 30 days of purchase.",
                "page": 2,
            },
            {"question": "", "expected_answer": "Dropped: no question", "source_span": "x"},
        ),
    )

    dataset = extract(agent, "policy.pdf", files.pdf_bytes(POLICY_PAGES))

    assert dataset.status == "ready", dataset.failure_reason
    assert case_rows(dataset) == [
        ("Can I get a refund after 20 days?", "Yes, within 30 days of purchase.", "page 2"),
        ("When is support open?", "9-17 CET on weekdays.", "page 3"),
    ]
    first = dataset.cases.order_by("position").first()
    assert first.source_span == "Refunds are available within 30 days of purchase."
    assert first.document_context == first.source_span
    assert first.tests_rule == "Refund window"
    # The uploaded file is the case's source, not an attachment the agent would read.
    assert first.source_document.file_type == "pdf"
    assert not first.documents.exists()
    # The model saw the text with its page markers, under the extract task.
    request = fake_llm.requests[0]
    assert request.task == "extract"
    assert "[Page 2]" in request.text and "Refunds are available" in request.text
    assert request.trace["dataset"] == str(dataset.pk)
    # Document.text keeps the pages apart for previews and agents.
    assert dataset.documents.get().text.count("\f") == 2


def test_long_documents_are_read_in_chunks_that_keep_their_pages(agent, fake_llm, settings):
    settings.EVALSITE_EXTRACT_CHUNK_CHARS = 1_200
    pages = [
        [f"Rule {page}.{line}: orders of type {page}-{line} ship within {line} days." for line in range(1, 40)]
        for page in range(1, 6)
    ]

    def answer(request: dict) -> dict:
        text = request["messages"][-1]["content"]
        first_page = int(text.split("[Page ", 1)[1].split("]", 1)[0])
        span = f"Rule {first_page}.1: orders of type {first_page}-1 ship within 1 days."
        found = (
            [
                {
                    "question": f"How fast do type {first_page}-1 orders ship?",
                    "expected_answer": "1 day",
                    "source_span": span,
                    "page": None,
                }
            ]
            if span in text
            else []
        )
        return {"json": {"cases": found}}

    fake_llm.add_rule(task="extract", handler=answer)

    dataset = extract(agent, "rules.pdf", files.pdf_bytes(pages))

    assert dataset.status == "ready", dataset.failure_reason
    assert fake_llm.count(task="extract") > 5
    assert all(len(r.messages[-1]["content"]) <= 1_200 for r in fake_llm.requests)
    assert [location for _, _, location in case_rows(dataset)] == [f"page {n}" for n in range(1, 6)]


def test_a_model_that_returns_broken_json_twice_fails_the_dataset_with_no_cases(agent, fake_llm):
    fake_llm.add_rule(
        task="extract",
        broken_json=True,
        json=model_cases({"question": "Q?", "expected_answer": "A", "source_span": "Refunds are available", "page": 2}),
    )

    dataset = extract(agent, "policy.pdf", files.pdf_bytes(POLICY_PAGES))

    assert dataset.status == "failed"
    assert "could not be read as test cases" in dataset.failure_reason
    assert dataset.cases.count() == 0
    # The answer and its repair round, then once more at another temperature (never the identical call).
    assert fake_llm.count(task="extract") == 4
    assert [r.body.get("temperature") for r in fake_llm.requests] == [0, 0, 0.5, 0.5]


def test_one_broken_chunk_fails_everything_so_no_partial_set_is_saved(agent, fake_llm, settings):
    settings.EVALSITE_EXTRACT_CHUNK_CHARS = 1_500
    good = model_cases({"question": "Fine?", "expected_answer": "Yes", "source_span": "x", "page": None})
    fake_llm.add_rule(task="extract", contains="[Page 3]", status=401)
    fake_llm.add_rule(task="extract", json=good)
    pages = [[f"Paragraph {page}.{n} of a long policy text about returns." for n in range(30)] for page in range(1, 5)]

    dataset = extract(agent, "long.pdf", files.pdf_bytes(pages))

    assert dataset.status == "failed"
    assert "The model could not read the document" in dataset.failure_reason
    assert TestCase.objects.count() == 0


def test_a_chunk_too_long_for_the_model_is_halved_and_read_again(agent, fake_llm, settings):
    settings.EVALSITE_EXTRACT_CHUNK_CHARS = 8_000
    fake_llm.set_context_window(5_000)
    fake_llm.add_rule(
        task="extract",
        handler=lambda request: {
            "json": model_cases(
                {
                    "question": f"About part {len(request['messages'][-1]['content'])}?",
                    "expected_answer": "Yes",
                    "source_span": "",
                    "page": None,
                }
            )
        },
    )
    text = "\n\n".join(f"Section {n}. " + "The warranty covers parts and labour for two years. " * 6 for n in range(25))

    dataset = extract(agent, "warranty.md", text.encode())

    assert dataset.status == "ready", dataset.failure_reason
    answered = [r for r in fake_llm.requests if r.status == 200]
    assert answered and all(len(r.text) <= 5_000 for r in answered)


def test_labelled_questions_in_a_pdf_need_no_model(agent, no_llm):
    pages = [
        ["Support bot test plan", "Q1: How long is the refund window?", "Expected answer: 30 days from purchase."],
        ["Q2: When is support open?", "Expected answer: Weekdays 9-17 CET,", "including public holidays."],
    ]

    dataset = extract(agent, "plan.pdf", files.pdf_bytes(pages))

    assert case_rows(dataset) == [
        ("How long is the refund window?", "30 days from purchase.", "page 1"),
        # The PDF's hard wrap inside the answer is joined.
        ("When is support open?", "Weekdays 9-17 CET, including public holidays.", "page 2"),
    ]


def test_markdown_and_word_prose_go_to_the_model(agent, fake_llm):
    fake_llm.add_rule(
        task="extract",
        json=model_cases(
            {
                "question": "Do you ship abroad?",
                "expected_answer": "Yes, to the EU.",
                "source_span": "We ship to the EU.",
            }
        ),
    )

    markdown = extract(agent, "shipping.md", b"# Shipping\n\nWe ship to the EU. Delivery takes 3 days.\n")
    word = extract(agent, "shipping.docx", files.docx_bytes(["Shipping", "We ship to the EU. Delivery takes 3 days."]))

    # Markdown cases get the line their span is on; Word paragraphs have no stable place to name.
    for dataset, location in ((markdown, "line 3"), (word, "")):
        assert dataset.status == "ready", dataset.failure_reason
        assert case_rows(dataset) == [("Do you ship abroad?", "Yes, to the EU.", location)]


def test_a_model_that_finds_nothing_fails_with_what_to_do(agent, fake_llm):
    fake_llm.add_rule(task="extract", json={"cases": []})

    dataset = extract(agent, "notes.md", b"Lunch menu: soup, bread.\n")

    assert dataset.status == "failed"
    assert "No test cases found" in dataset.failure_reason


def test_more_than_500_model_cases_keep_the_first_500_and_say_so(agent, fake_llm, settings):
    settings.EVALSITE_EXTRACT_CHUNK_CHARS = 1_500
    counter = iter(range(10_000))

    def many(request: dict) -> dict:
        cases = [
            {
                "question": f"Distinct question {next(counter)} about topic {n * 7919}?",
                "expected_answer": "A",
                "source_span": "",
            }
            for n in range(60)
        ]
        return {"json": {"cases": cases}}

    fake_llm.add_rule(task="extract", handler=many)
    text = "\n\n".join(f"Rule {n}: " + "customers may return goods. " * 10 for n in range(60))

    dataset = extract(agent, "rules.md", text.encode())

    assert dataset.status == "ready"
    assert dataset.cases.count() == 500
    assert "more than 500" in dataset.notice


@pytest.mark.django_db(transaction=True)
def test_deleting_the_dataset_while_it_is_read_leaves_no_rows_or_files(agent, fake_llm, media_root):  # noqa: F811
    dataset = uploaded_dataset(agent, "policy.pdf", files.pdf_bytes(POLICY_PAGES))
    assert stored_files(media_root)

    def delete_meanwhile(request: dict) -> dict:
        from django.db import connection

        # Runs in the fake server's thread, with its own database connection: close it after.
        try:
            dataset_delete(dataset=Dataset.objects.get(pk=dataset.pk))
        finally:
            connection.close()
        return {"json": model_cases({"question": "Q?", "expected_answer": "A", "source_span": "x"})}

    fake_llm.add_rule(task="extract", handler=delete_meanwhile)

    from datasets.extraction.services import dataset_extract

    dataset_extract(dataset_id=dataset.pk)

    assert not Dataset.objects.filter(pk=dataset.pk).exists()
    assert TestCase.objects.count() == 0
    assert Document.objects.count() == 0
    assert stored_files(media_root) == []


def test_the_case_schema_is_what_the_prompt_promises():
    from datasets.extraction.llm_cases import CASES_SCHEMA, SYSTEM_PROMPT

    example = SYSTEM_PROMPT.rsplit("Reply with JSON only:\n", 1)[1]
    import jsonschema

    jsonschema.validate(json.loads(example), CASES_SCHEMA)


def test_near_duplicates_are_dropped_but_questions_with_other_numbers_are_kept():
    from datasets.extraction.dedupe import NearDuplicates

    seen = NearDuplicates()

    assert seen.is_new("Can I get a refund after 10 days?")
    assert not seen.is_new("can I get a refund after 10 days ?")
    assert not seen.is_new("Can I get refund after 10 days?")
    assert seen.is_new("Can I get a refund after 40 days?")
    assert seen.is_new("When is support open?")
