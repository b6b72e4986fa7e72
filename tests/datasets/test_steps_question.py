"""Steps become the question: a test plan whose Steps quote the user's message imports with
the quoted message as the question and the steps kept beside it; columns combine into one field,
and the mapping step shows what the first rows become."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from datasets.extraction.mapping import mapping_from_json
from datasets.extraction.steps import user_message
from datasets.extraction.tables import result_preview
from datasets.models import Dataset
from tests.datasets import files
from tests.datasets.extraction_helpers import confirm_mapping, extract, media_root  # noqa: F401

pytestmark = pytest.mark.django_db

HEADER = ["TC ID", "Module", "Scenario", "Steps", "Test Data", "Expected Result", "Priority"]
PLAN = [
    [
        "TC-01",
        "Billing",
        "Refund on an annual plan within the window",
        "1. Open the chat widget\n2. Ask: 'How many days do I have to get a refund on my annual plan?'\n"
        "3. Read the reply",
        "Plan: annual, bought 10 days ago",
        "Agent explains annual plans are refundable within 14 days; directs them to Billing > Refund",
        "High",
    ],
    [
        "TC-02",
        "Account",
        "Locked out of the account",
        '1. Log in as demo user 2. Type "I can\'t log in, it says my account is locked" 3. Check the reply',
        "User: demo@acme.test",
        "Agent offers the unlock link",
        "High",
    ],
    [
        "TC-03",
        "Support",
        "Support hours in French",
        "1. Open the chat 2. User says: «Quand est-ce que le support est ouvert ?»",
        "",
        "Weekdays 9-17 CET",
        "Low",
    ],
    [
        "TC-04",
        "Support",
        "Escalation to a person",
        "1. Open the chat 2. Customer: “I want to talk to a human.” 3. Wait",
        "",
        "Agent hands over to a person",
        "Medium",
    ],
    [
        "TC-05",
        "Billing",
        "Invoice download",
        "1. Go to Billing 2. Click Invoices 3. Download the latest invoice",
        "",
        "The PDF downloads",
        "Low",
    ],
]
QUOTED = [
    "How many days do I have to get a refund on my annual plan?",
    "I can't log in, it says my account is locked",
    "Quand est-ce que le support est ouvert ?",
    "I want to talk to a human.",
]


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Steps are read without a model."""


def _plan() -> bytes:
    return files.xlsx_bytes({"Regression plan": [["Acme support bot"], [], HEADER, *PLAN]})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1. Open chat 2. Ask: 'How long is the refund window?'", "How long is the refund window?"),
        ('Type: "Where is my order?"', "Where is my order?"),
        ("Say: “Cancel my plan.”", "Cancel my plan."),
        ("Say: ‘I can’t find the invoice’ and wait", "I can’t find the invoice"),
        ("User says: «Où est ma commande ?»", "Où est ma commande ?"),
        ("Customer: „Wie lange dauert der Versand?“", "Wie lange dauert der Versand?"),
        ("2. Ask the agent: 'Do you ship to Norway?'", "Do you ship to Norway?"),
        ("1. Open the FAQ 2. Ask 'is there a student discount?'", "is there a student discount?"),
        ("Click “Billing”, then “Refunds”", ""),  # UI labels, no cue: no message
        ("Ask: 'Hi' then ask: 'Are you there?'", ""),  # two messages: not one question
        ("Navigate to the customer's account page", ""),
    ],
)
def test_the_user_message_is_the_one_quoted_after_a_cue(text, message):
    assert user_message(text)[0] == message


def test_a_plan_whose_steps_quote_the_user_proposes_the_quoted_message_as_the_question(agent):
    dataset = extract(agent, "plan.xlsx", _plan(), confirm=False)

    assert dataset.status == Dataset.Status.REVIEW
    table = dataset.mapping["tables"][0]
    fields = {column["header"]: column["field"] for column in table["columns"]}
    assert fields["Steps"] == "quoted_question"
    assert fields["Scenario"] == "metadata"
    assert fields["Test Data"] == "document_context"
    assert fields["Expected Result"] == "expected_answer"
    # The mapping step shows what the first rows become before anything is created.
    shown = result_preview(table, {str(c["index"]): c["field"] for c in table["columns"]})
    assert [case["question"] for case in shown[:4]] == QUOTED
    assert shown[0]["question_from"] == "Steps"

    dataset = confirm_mapping(dataset)

    cases = list(dataset.cases.order_by("position"))
    assert [case.question for case in cases[:4]] == QUOTED
    assert cases[0].metadata["Steps"] == PLAN[0][3]  # the whole steps text is kept
    assert cases[0].metadata["Scenario"] == PLAN[0][2]
    assert cases[0].extra == {"question_from": "Steps"}
    assert cases[0].document_context == "Plan: annual, bought 10 days ago"
    # No quoted message: the whole steps text is the question, and the case says so.
    assert cases[4].question == PLAN[4][3]
    assert cases[4].extra == {}
    assert any("quotes no user message" in warning for warning in cases[4].import_warnings)


def test_the_user_can_switch_back_to_the_whole_steps_text(agent):
    dataset = extract(agent, "plan.xlsx", _plan(), confirm=False)
    tables = dataset.mapping["tables"]

    chosen = mapping_from_json(tables=tables, raw={"Steps": "question"})
    dataset = confirm_mapping(dataset, chosen)

    assert dataset.cases.order_by("position").first().question == PLAN[0][3]


def test_columns_combine_into_one_field_under_their_headers(agent):
    dataset = extract(agent, "plan.xlsx", _plan(), confirm=False)
    tables = dataset.mapping["tables"]

    chosen = mapping_from_json(tables=tables, raw={"Scenario": "context", "Test Data": "context"})
    preview = result_preview(tables[0], chosen["tables"]["0"]["columns"])
    dataset = confirm_mapping(dataset, chosen)

    combined = f"Scenario: {PLAN[0][2]}\nTest Data: {PLAN[0][4]}"
    assert preview[0]["document_context"] == combined
    first, third = dataset.cases.order_by("position")[0], dataset.cases.order_by("position")[2]
    assert first.document_context == combined
    assert first.question == QUOTED[0]
    assert third.document_context == PLAN[2][2]  # an empty column adds nothing


def test_dataset_import_dry_run_json_takes_the_quoted_messages(tmp_path: Path, agent):
    path = tmp_path / "plan.xlsx"
    path.write_bytes(_plan())
    out = io.StringIO()

    call_command("dataset_import", str(path), "--agent", str(agent.pk), "--dry-run", "--json", stdout=out)

    result = json.loads(out.getvalue())
    assert result["mapping"][0]["columns"]["Steps"] == "quoted_question"
    assert [case["question"] for case in result["cases"][:4]] == QUOTED
    assert result["cases"][0]["question_from"] == "Steps"
    assert result["cases"][0]["metadata"]["Steps"] == PLAN[0][3]
    assert not Dataset.objects.exists()


def test_a_column_named_for_what_the_user_says_beats_quoted_steps(agent):
    rows = [["Scenario", "Steps", "User says", "Expected"]]
    rows += [["Refunds", "1. Open chat 2. Ask: 'Refund?'", "Can I get a refund?", "Yes"]]
    rows += [["Hours", "1. Open chat 2. Ask: 'Hours?'", "When are you open?", "9-17"]]

    dataset = extract(agent, "plan.csv", files.csv_bytes(rows), confirm=False)

    fields = {c["header"]: c["field"] for c in dataset.mapping["tables"][0]["columns"]}
    assert fields["User says"] == "question" and fields["Steps"] == "metadata"


# ---- the mapping page ------------------------------------------------------------------


def _mapping_url(dataset: Dataset) -> str:
    return reverse("datasets:mapping", args=[dataset.agent_id, dataset.pk])


def _columns(dataset: Dataset) -> dict[str, int]:
    return {c["header"]: c["index"] for c in dataset.mapping["tables"][0]["columns"]}


def test_the_mapping_page_shows_the_quoted_question_the_first_rows_become(client_alice, agent):
    dataset = extract(agent, "plan.xlsx", _plan(), confirm=False)

    html = client_alice.get(_mapping_url(dataset)).content.decode()

    assert "What the first 5 rows become" in html
    assert "How many days do I have to get a refund on my annual plan?" in html
    assert "Quoted in “Steps”" in html and "the whole text is kept on the case" in html
    assert '<option value="quoted_question" selected>Quoted question</option>' in html


def test_changing_a_field_shows_the_new_result_without_creating_anything(client_alice, agent):
    dataset = extract(agent, "plan.xlsx", _plan(), confirm=False)
    index = _columns(dataset)
    data = {f"t0_c{c['index']}": c["field"] for c in dataset.mapping["tables"][0]["columns"]}
    data.update({"t0_include": "on", f"t0_c{index['Scenario']}": "document_context", "preview": "1"})

    response = client_alice.post(_mapping_url(dataset), data, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="mapping-form"' in html and "<html" not in html  # the form alone, swapped in place
    assert "Context: the columns mapped to it are joined" in html
    assert "Scenario: Refund on an annual plan within the window" in html
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.REVIEW and not dataset.cases.exists()


def test_a_preview_says_what_is_wrong_before_the_user_confirms(client_alice, agent):
    dataset = extract(agent, "plan.xlsx", _plan(), confirm=False)
    index = _columns(dataset)
    data = {"t0_include": "on", f"t0_c{index['Scenario']}": "question", f"t0_c{index['Steps']}": "quoted_question"}

    response = client_alice.post(_mapping_url(dataset), {**data, "preview": "1"}, HTTP_HX_REQUEST="true")

    assert "map exactly one column to the question" in response.content.decode()
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.REVIEW
