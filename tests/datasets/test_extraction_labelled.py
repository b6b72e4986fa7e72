"""Labelled cases in prose documents (PDF, Word, Markdown): ID lines, Question / Expected answer /
Notes blocks, wrapped lines joined, and every kind of case in one document read."""

import pytest

from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


def _cases(dataset):
    return list(
        dataset.cases.order_by("position").values_list(
            "case_id", "question", "expected_answer", "judge_guideline", "source_location"
        )
    )


def test_a_pdf_of_labelled_blocks_with_ids_and_wrapped_lines(agent, no_llm):
    pages = [
        [
            "Refund test plan, release 3.2",
            "TC-001: Refund window",
            "Question: Can I get a refund 40 days after I",
            "bought the Pro plan?",
            "Expected answer: No. Refunds are available within 30",
            "days of purchase.",
            "Notes: The agent must not promise an exception.",
            "TC-002: Enterprise SLA",
            "Question: What credit do Enterprise customers get for an outage?",
            "Expected answer: 10% of the monthly fee for each hour",
            "below the 99.9% SLA.",
        ],
        [
            "TC-003",
            "Question: Is support open on Sunday?",
            "Expected answer: No, weekdays 9-17 CET only.",
        ],
    ]

    dataset = extract(agent, "plan.pdf", files.pdf_bytes(pages))

    assert dataset.status == "ready", dataset.failure_reason
    assert _cases(dataset) == [
        (
            "TC-001",
            "Can I get a refund 40 days after I bought the Pro plan?",
            "No. Refunds are available within 30 days of purchase.",
            "The agent must not promise an exception.",
            "page 1",
        ),
        # The answer ends at the next case's ID line: "TC-002: Enterprise SLA" is not part of it.
        (
            "TC-002",
            "What credit do Enterprise customers get for an outage?",
            "10% of the monthly fee for each hour below the 99.9% SLA.",
            "",
            "page 1",
        ),
        ("TC-003", "Is support open on Sunday?", "No, weekdays 9-17 CET only.", "", "page 2"),
    ]
    first = dataset.cases.order_by("position").first()
    assert first.source_span.startswith("TC-001: Refund window\nQuestion: Can I get a refund 40 days after I")


def test_a_word_document_of_labelled_blocks(agent, no_llm):
    data = files.docx_bytes(
        [
            "Support bot test plan",
            "ID: SUP-1",
            "Question: When is support open?",
            "Expected answer: Weekdays 9-17 CET.",
            "ID: SUP-2",
            "Question: Do you offer phone support?",
            "Expected answer: Yes, on the Business plan.",
            "Notes: Accept any wording that names the Business plan.",
        ]
    )

    dataset = extract(agent, "plan.docx", data)

    assert _cases(dataset) == [
        ("SUP-1", "When is support open?", "Weekdays 9-17 CET.", "", "paragraph 2"),
        (
            "SUP-2",
            "Do you offer phone support?",
            "Yes, on the Business plan.",
            "Accept any wording that names the Business plan.",
            "paragraph 5",
        ),
    ]


MARKDOWN_BLOCKS = b"""# Billing test plan

## BILL-1: Invoice payment

Question: Can I pay by invoice
on the Starter plan?

Expected answer: No. Invoice payment is
available on the Business plan only.

Customers on Starter pay by card.

Notes: Mention the Business plan.

## BILL-2: Currency

**Question:** Which currencies can I pay in?
**Expected answer:** EUR and USD.

## Appendix

Nothing here is a case.
"""


def test_markdown_blocks_join_wraps_keep_paragraphs_and_give_line_numbers(agent, no_llm):
    dataset = extract(agent, "billing.md", MARKDOWN_BLOCKS)

    assert _cases(dataset) == [
        (
            "BILL-1",
            "Can I pay by invoice on the Starter plan?",
            "No. Invoice payment is available on the Business plan only.\n\nCustomers on Starter pay by card.",
            "Mention the Business plan.",
            "line 3",
        ),
        ("BILL-2", "Which currencies can I pay in?", "EUR and USD.", "", "line 15"),
    ]


MIXED_MARKDOWN = b"""# Support test plan

| ID | Question | Expected answer |
|----|----------|-----------------|
| T-1 | How long is the refund window? | 30 days from purchase. |
| T-2 | Can I pay by invoice? | Yes, on the Business plan. |

## Labelled cases

L-1: Phone support
Question: Is there phone support?
Expected answer: Yes, for Enterprise customers.

L-2: Data export
Question: Can I export my data?
Expected answer: Yes, as CSV from the settings page.

## Policy

Accounts that stay unpaid for 30 days are suspended, and their data is kept for another 60 days before it is
deleted for good. A suspended account can be restored by paying the open invoices; the owner receives a
reminder email seven days before the suspension and again on the day it happens. Non-profit organisations
get a 20% discount on every plan once their status is verified by the billing team.
"""


def test_a_mixed_markdown_file_gives_table_labelled_and_prose_cases_each_with_its_line(agent, fake_llm):
    fake_llm.add_rule(
        task="extract",
        json={
            "cases": [
                {
                    "question": "What discount do non-profits get?",
                    "expected_answer": "20% on every plan, once verified.",
                    "source_span": "Non-profit organisations get a 20% discount on every plan",
                },
                # Already a labelled case: not added twice.
                {
                    "question": "Is there phone support?",
                    "expected_answer": "Yes.",
                    "source_span": "Is there phone support?",
                },
            ]
        },
    )

    dataset = extract(agent, "support.md", MIXED_MARKDOWN)

    assert dataset.status == "ready", dataset.failure_reason
    assert [(c[0], c[1], c[4]) for c in _cases(dataset)] == [
        ("T-1", "How long is the refund window?", "line 5"),
        ("T-2", "Can I pay by invoice?", "line 6"),
        ("L-1", "Is there phone support?", "line 10"),
        ("L-2", "Can I export my data?", "line 14"),
        ("", "What discount do non-profits get?", "line 22"),
    ]
    # The model was sent only the prose no table or labelled block had taken.
    (request,) = [r for r in fake_llm.requests if r.task == "extract"]
    assert "Non-profit organisations" in request.text
    assert "How long is the refund window" not in request.text
    assert "Is there phone support" not in request.text


def test_without_a_model_the_mixed_file_still_gives_its_table_and_labelled_cases(agent, no_llm):
    dataset = extract(agent, "support.md", MIXED_MARKDOWN)
    assert [c[0] for c in _cases(dataset)] == ["T-1", "T-2", "L-1", "L-2"]


def test_when_the_model_fails_on_the_prose_the_other_cases_are_kept_with_a_notice(agent, fake_llm):
    fake_llm.add_rule(task="extract", status=401, error="Incorrect API key provided.")

    dataset = extract(agent, "support.md", MIXED_MARKDOWN)

    assert dataset.status == "ready", dataset.failure_reason
    assert [c[0] for c in _cases(dataset)] == ["T-1", "T-2", "L-1", "L-2"]
    assert dataset.notice.startswith("The 4 test cases in the document's tables and labelled blocks were kept")


def test_ids_in_a_bulleted_answer_do_not_start_new_cases(agent, no_llm):
    text = (
        b"Question: Which orders were refunded?\nExpected answer: These two:\n- ORD-1: refunded in full\n"
        b"- ORD-2: refunded in part\n\nQuestion: Which were not?\nExpected answer: None.\n"
    )
    dataset = extract(agent, "orders.md", text)
    assert [c[2] for c in _cases(dataset)] == [
        "These two:\n- ORD-1: refunded in full\n- ORD-2: refunded in part",
        "None.",
    ]
