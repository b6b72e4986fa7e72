"""With a model connected, the mapping step's option: the model writes the user's message for
rows whose steps quote none, each marked as written by the model, its steps kept."""

from __future__ import annotations

import pytest
from django.urls import reverse

from datasets.models import Dataset
from tests.datasets.extraction_helpers import confirm_mapping, extract, media_root  # noqa: F401
from tests.datasets.test_steps_question import PLAN, QUOTED, _plan

pytestmark = pytest.mark.django_db

PROMPT_WORDS = "Write the message the user sends"


def _confirm(dataset: Dataset, *, derive: bool) -> Dataset:
    from datasets.extraction.mapping import dataset_mapping_confirm
    from datasets.extraction.services import dataset_extract

    dataset_mapping_confirm(dataset=dataset, chosen=None, keep_first=True, derive_questions=derive)
    dataset_extract(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    return dataset


def test_the_model_writes_the_message_for_steps_that_quote_none_when_asked(agent, fake_llm):
    fake_llm.add_rule(task="extract", contains=PROMPT_WORDS, json={"message": "How do I download my last invoice?"})
    dataset = extract(agent, "plan.xlsx", _plan(), confirm=False)
    assert dataset.mapping["tables"][0]["unquoted"] == 1

    dataset = _confirm(dataset, derive=True)

    cases = list(dataset.cases.order_by("position"))
    assert [case.question for case in cases[:4]] == QUOTED  # quoted ones: no model call
    derived = cases[4]
    assert derived.question == "How do I download my last invoice?"
    assert derived.extra == {"question_from": "Steps", "question_written_by": "model"}
    assert derived.metadata["Steps"] == PLAN[4][3]  # its source kept
    assert any("The model wrote this question" in w for w in derived.import_warnings)
    assert not any("quotes no user message" in w for w in derived.import_warnings)
    assert fake_llm.count("extract") == 1
    assert PLAN[4][3] in fake_llm.requests[0].text


def test_without_the_option_no_model_call_is_made(agent, fake_llm):
    dataset = _confirm(extract(agent, "plan.xlsx", _plan(), confirm=False), derive=False)

    assert dataset.cases.order_by("position")[4].question == PLAN[4][3]
    assert fake_llm.count("extract") == 0


def test_a_model_failure_keeps_the_steps_as_the_question_and_says_why(agent, fake_llm):
    fake_llm.add_rule(task="extract", contains=PROMPT_WORDS, status=401, error="Incorrect API key provided.")

    dataset = _confirm(extract(agent, "plan.xlsx", _plan(), confirm=False), derive=True)

    case = dataset.cases.order_by("position")[4]
    assert dataset.status == Dataset.Status.READY
    assert case.question == PLAN[4][3] and case.extra == {}
    assert any("The model could not write this question" in w for w in case.import_warnings)


def test_the_mapping_page_offers_the_model_only_when_one_is_connected(client_alice, agent, settings, fake_llm):
    dataset = extract(agent, "plan.xlsx", _plan(), confirm=False)
    url = reverse("datasets:mapping", args=[agent.pk, dataset.pk])

    html = client_alice.get(url).content.decode()
    assert 'name="derive_questions"' in html and "for the 1 row whose steps quote none" in html

    settings.EVALSITE_LLM_MODEL = ""
    html = client_alice.get(url).content.decode()
    assert 'name="derive_questions"' not in html and "how to connect a model" in html


def test_the_api_confirms_a_mapping_with_the_model_option(alice, agent, fake_llm):
    from django.test import Client

    from accounts.services import api_token_create
    from datasets.extraction.services import dataset_extract

    fake_llm.add_rule(task="extract", contains=PROMPT_WORDS, json={"message": "Where are my invoices?"})
    dataset = extract(agent, "plan.xlsx", _plan(), confirm=False)
    _token, raw = api_token_create(user=alice, name="ci")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")

    response = client.post(
        f"/api/agents/{agent.pk}/eval/datasets/{dataset.pk}/mapping",
        {"derive_questions": True},
        content_type="application/json",
    )
    dataset_extract(dataset_id=dataset.pk)

    assert response.status_code == 202, response.content
    assert dataset.cases.order_by("position")[4].question == "Where are my invoices?"
