"""Fields that only work with a model say so where they are set (issue 14 item 24)."""

import re

import pytest
from django.urls import reverse

from tests.factories import DatasetFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _needs(html: str, label: str) -> bool:
    """The field labelled `label` carries the "Needs a model" mark in its label."""
    pattern = re.escape(label) + r"(?:(?!</label>).)*needs-model"
    return re.search(pattern, html, re.S) is not None


def test_the_case_form_marks_smoke_tests_and_the_guideline_without_a_model(client_alice, agent, no_llm):
    dataset = DatasetFactory(agent=agent)
    html = client_alice.get(reverse("datasets:case_create", args=[agent.pk, dataset.pk]), **HTMX).content.decode()
    assert _needs(html, "Smoke-test paraphrases")
    assert _needs(html, "Paraphrase guidance")
    assert _needs(html, "Judge guideline")
    assert "No model is configured to paraphrase questions" in html
    assert not _needs(html, "Expected answer")


def test_the_case_form_has_no_marks_with_a_model(client_alice, agent, settings):
    settings.EVALSITE_LLM_MODEL = "openai/fake"
    dataset = DatasetFactory(agent=agent)
    html = client_alice.get(reverse("datasets:case_create", args=[agent.pk, dataset.pk]), **HTMX).content.decode()
    assert "needs-model" not in html


def test_dataset_settings_mark_judge_only_fields_without_a_judge(client_alice, agent, no_llm):
    dataset = DatasetFactory(agent=agent)
    html = client_alice.get(reverse("datasets:settings", args=[agent.pk, dataset.pk])).content.decode()
    for label in ("Acceptance criteria", "Rejection criteria", "Evaluation criteria", "Judge prompt override"):
        assert _needs(html, label), label
    assert _needs(html, "Vector similarity")
    assert "runs use the offline reference scorer, which does not read" in html
    assert not _needs(html, "Pass threshold")


def test_a_datasets_own_judge_model_lifts_the_judge_marks(client_alice, agent, no_llm):
    dataset = DatasetFactory(agent=agent, judge_model="openai/gpt-4o-mini")
    html = client_alice.get(reverse("datasets:settings", args=[agent.pk, dataset.pk])).content.decode()
    assert not _needs(html, "Acceptance criteria")
    assert _needs(html, "Vector similarity")  # embeddings are another model
