"""Generate with AI: garbage the model writes is rejected with a warning naming it (issue 33)."""

import pytest

from datasets.models import Dataset
from tests.datasets.test_generation import QUESTIONS, case, generated
from tests.datasets.test_generation import media_root as media_root  # an autouse fixture
from tests.datasets.test_generation import support_agent as shared_support_agent

pytestmark = pytest.mark.django_db

support_agent = shared_support_agent

# What SmolLM2-135M wrote for "Generate 5 with attachments" (issue 33).
SMOLLM2_CASES = [
    {"question": "R1", "expected_answer": "{ {", "tests_rule": "R1"},
    {"question": "R4", "expected_answer": "{ {'type':", "tests_rule": "R4"},
]


def test_placeholder_and_json_cases_are_rejected_and_the_dataset_is_ready_with_warnings(
    fake_llm, support_agent, settings
):
    fake_llm.add_rule(task="generate", json={"cases": [*SMOLLM2_CASES, case(QUESTIONS[0])]}, times=1)
    fake_llm.add_rule(task="generate", json={"cases": [case(QUESTIONS[1]), case(QUESTIONS[2])]})

    dataset = generated(support_agent, count=3)

    assert dataset.status == Dataset.Status.READY
    assert dataset.status_label == "Ready with warnings"
    assert sorted(dataset.cases.values_list("question", flat=True)) == sorted(QUESTIONS[:3])
    messages = [warning["message"] for warning in dataset.warnings]
    assert messages == [
        "A case was rejected: the question “R1”: it is too short to be a question.",
        "A case was rejected: the question “R4”: it is too short to be a question.",
    ]
    assert all(
        warning["where"] == f"Written by the model {settings.EVALSITE_LLM_MODEL}" for warning in dataset.warnings
    )
    assert dataset.generation["dropped"] == {"garbage": 2}


def test_a_copy_of_an_earlier_case_is_named_in_a_warning(fake_llm, support_agent):
    fake_llm.add_rule(task="generate", json={"cases": [case(QUESTIONS[0]), case(QUESTIONS[0])]}, times=1)
    fake_llm.add_rule(task="generate", json={"cases": [case(QUESTIONS[1])]})

    dataset = generated(support_agent, count=2)

    assert dataset.status_label == "Ready with warnings"
    assert dataset.warnings[0]["message"] == (
        f"A case was rejected: the question “{QUESTIONS[0][:59]}…” repeats an earlier one."
    )


def test_a_model_that_writes_only_garbage_fails_the_dataset_saying_what_it_wrote(fake_llm, support_agent):
    fake_llm.add_rule(task="generate", json={"cases": SMOLLM2_CASES})

    dataset = generated(support_agent, count=2)

    assert dataset.status == Dataset.Status.FAILED
    assert "0 usable test cases of the 2 asked for" in dataset.failure_reason
    assert "were not real test cases, e.g. the question “R1”: it is too short to be a question" in (
        dataset.failure_reason
    )
    assert not dataset.cases.exists()


def test_clean_generation_stays_plain_ready(fake_llm, support_agent):
    fake_llm.add_rule(task="generate", json={"cases": [case(q) for q in QUESTIONS[:3]]})

    dataset = generated(support_agent, count=3)

    assert dataset.status_label == "Ready"
    assert dataset.warnings == []


def test_the_dataset_page_and_list_say_ready_with_warnings_and_name_the_rejected_cases(
    fake_llm, support_agent, client_alice
):
    from django.urls import reverse

    fake_llm.add_rule(task="generate", json={"cases": [*SMOLLM2_CASES, case(QUESTIONS[0])]}, times=1)
    fake_llm.add_rule(task="generate", json={"cases": [case(QUESTIONS[1]), case(QUESTIONS[2])]})
    dataset = generated(support_agent, count=3)

    page = client_alice.get(reverse("datasets:detail", args=[support_agent.pk, dataset.pk])).content.decode()
    listing = client_alice.get(reverse("datasets:list", args=[support_agent.pk])).content.decode()

    assert "Ready with warnings" in page and "Ready with warnings" in listing
    assert "the model wrote 2 cases that were not kept" in page
    assert "the question “R1”: it is too short to be a question" in page


def test_one_rejected_case_is_counted_in_the_singular(fake_llm, support_agent):
    # What SmolLM2-135M wrote for 3 cases on 2026-12-03: one question "R2", one case without a question.
    fake_llm.add_rule(
        task="generate", json={"cases": [{"question": "R2", "expected_answer": "Yes.", "tests_rule": "R2"}]}, times=1
    )
    fake_llm.add_rule(task="generate", json={"cases": []})

    dataset = generated(support_agent, count=3)

    assert "(1 was not a real test case, e.g. the question “R2”: it is too short to be a question)" in (
        dataset.failure_reason
    )
