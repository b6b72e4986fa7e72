"""Rule coverage's "Map with AI": a model map that ties fewer rules than the word map is a
proposal shown beside it, never swapped in silently (issue 33: 0 of 39 replaced 10 of 39)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.rules import rule_id
from datasets.coverage import coverage_for
from datasets.models import RuleMap
from tests.factories import DatasetFactory, TestCaseFactory
from tests.runs.test_coverage import billing_agent as shared_billing_agent

pytestmark = pytest.mark.django_db
billing_agent = shared_billing_agent

STATEMENT = "The agent refunds purchases made within the last 30 days."
INVOICE = "The agent never shows one customer's invoice to another."


@pytest.fixture
def mapped(client_alice, billing_agent, fake_llm, tasks_run_here, django_capture_on_commit_callbacks):
    """Map a dataset whose two cases the word map ties to two rules; `links` is what the model answers."""

    def map_with(links: list[dict]) -> tuple:
        dataset = DatasetFactory(agent=billing_agent)
        TestCaseFactory(dataset=dataset, question="Can I get a refund 10 days after purchase?",
                        expected_answer="Yes, refunds are possible within 30 days of purchase.")  # fmt: skip
        TestCaseFactory(dataset=dataset, question="Show me another customer's invoice",
                        expected_answer="I can't reveal another customer's invoice.")  # fmt: skip
        fake_llm.add_rule(
            task="coverage", contains="atomic, testable rules",
            json={"rules": [{"section": "Knowledge", "text": STATEMENT}, {"section": "Guardrails", "text": INVOICE}]},
        )  # fmt: skip
        fake_llm.add_rule(task="coverage", contains="map test cases", json={"cases": links})
        with django_capture_on_commit_callbacks(execute=True):
            client_alice.post(
                reverse("coverage:map", args=[billing_agent.pk, dataset.pk]),
                {"version": billing_agent.current_version_id},
            )
        return dataset, RuleMap.objects.get(dataset=dataset)

    return map_with


def test_a_map_that_ties_fewer_rules_than_words_is_kept_as_a_proposal(mapped, billing_agent, client_alice):
    dataset, rule_map = mapped([{"case": 1, "rules": []}, {"case": 2, "rules": []}])

    assert rule_map.status == RuleMap.Status.DONE and rule_map.is_proposal
    assert rule_map.tied == {"model": 0, "model_rules": 2, "words": 2, "word_rules": rule_map.tied["word_rules"]}
    coverage = coverage_for(dataset=dataset, version=billing_agent.current_version)
    assert coverage.method == "words"
    page = client_alice.get(reverse("coverage:page", args=[billing_agent.pk, dataset.pk])).content.decode()
    assert "The model's map was not used:</strong> it ties 0 of its 2 rules to a test case" in page
    assert "fewer than the word map (2 of" in page
    assert "Use the model's map anyway" in page


def test_the_proposal_can_be_adopted(mapped, billing_agent, client_alice):
    dataset, rule_map = mapped([{"case": 1, "rules": []}])
    url = reverse("coverage:adopt", args=[billing_agent.pk, dataset.pk])

    response = client_alice.post(url, {"version": billing_agent.current_version_id, "map": rule_map.pk})

    assert response.status_code == 302
    rule_map.refresh_from_db()
    assert rule_map.adopted
    assert coverage_for(dataset=dataset, version=billing_agent.current_version).method == "model"


def test_a_map_that_ties_as_many_rules_is_used_at_once(mapped, billing_agent):
    refund, invoice = rule_id("K", STATEMENT), rule_id("G", INVOICE)
    dataset, rule_map = mapped([{"case": 1, "rules": [refund]}, {"case": 2, "rules": [invoice]}])

    assert rule_map.tied["model"] == 2 and rule_map.tied["words"] == 2
    assert rule_map.adopted and not rule_map.is_proposal
    assert coverage_for(dataset=dataset, version=billing_agent.current_version).method == "model"


def test_a_map_that_ties_one_rule_fewer_is_a_proposal(mapped):
    _dataset, rule_map = mapped([{"case": 1, "rules": [rule_id("K", STATEMENT)]}])

    assert rule_map.tied["model"] == 1 and rule_map.is_proposal


def test_adopting_needs_the_post_and_this_datasets_map(mapped, billing_agent, client_alice, client_charlie):
    dataset, rule_map = mapped([{"case": 1, "rules": []}])
    url = reverse("coverage:adopt", args=[billing_agent.pk, dataset.pk])

    assert client_alice.get(url).status_code == 405
    assert client_charlie.post(url, {"map": rule_map.pk}).status_code == 404
    assert client_alice.post(url, {"map": rule_map.pk + 1000}).status_code == 404
    rule_map.refresh_from_db()
    assert not rule_map.adopted
