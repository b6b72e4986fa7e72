"""A failed retrieval-context check: it fails the case only where the dataset says so, and is
shown and counted either way; a case form warns when a check cannot apply to the agent."""

import pytest
from django.urls import reverse

from agents.models import Agent
from runs import services
from runs.judging.configs import dataset_judge_config
from runs.reports import exporters
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

MISSING = ["Shipping to Mars takes 9 months and costs $4,000."]


def _run(make_dataset, alice, fake_llm, *, gates: bool):
    fake_llm.add_rule(task="judge", json={"score": 9, "reasoning": "Right: the refund window is 30 days."})
    dataset = make_dataset(2, dataset={"context_gates": gates}, expected_context=MISSING)
    return dataset, drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))


def test_by_default_a_failed_context_check_is_shown_and_counted_without_changing_the_verdict(
    make_dataset, alice, fake_llm, client_alice
):
    dataset, run = _run(make_dataset, alice, fake_llm, gates=False)

    assert (run.passed, run.failed, run.ungated_checks_failed) == (2, 0, 2)
    row = next(row for row in run.results.first().scorers if row["name"] == "context")
    assert (row["passed"], row["gates"]) == (False, False)
    page = client_alice.get(reverse("runs:detail", args=[dataset.agent.pk, run.pk])).content.decode()
    assert "no match · verdict unchanged" in page
    assert "a failed retrieval-context check that did not change the verdict" in page
    assert dict(exporters.summary_rows(run))["Failed checks that did not change the verdict"] == 2


def test_the_dataset_can_make_a_failed_context_check_fail_the_case(make_dataset, alice, fake_llm, client_alice):
    dataset, run = _run(make_dataset, alice, fake_llm, gates=True)

    assert (run.passed, run.failed, run.ungated_checks_failed) == (0, 2, 0)
    result = run.results.first()
    assert "The retrieval context check failed: 0 of 1 expected passage(s)" in result.reasoning
    assert next(row for row in result.scorers if row["name"] == "context")["gates"] is True
    page = client_alice.get(reverse("runs:detail", args=[dataset.agent.pk, run.pk])).content.decode()
    assert "no match · fails the case" in page


def test_making_the_context_check_fail_cases_is_a_new_judge_configuration(make_dataset):
    dataset = make_dataset(1)
    before = dataset_judge_config(dataset=dataset)
    dataset.context_gates = True
    dataset.save()
    after = dataset_judge_config(dataset=dataset)
    assert after.number == before.number + 1
    assert "context (fails the case)" in after.scorers


@pytest.mark.parametrize(
    ("kind", "context_warned", "tools_warned"),
    [(Agent.Kind.LLM, True, True), (Agent.Kind.KNOWLEDGE, False, True), (Agent.Kind.HTTP, False, False)],
)
def test_the_case_form_warns_when_a_check_cannot_apply_to_the_agents_kind(
    make_dataset, client_alice, kind, context_warned, tools_warned
):
    dataset = make_dataset(0, kind=kind)
    url = reverse("datasets:case_create", args=[dataset.agent.pk, dataset.pk])

    page = client_alice.get(url).content.decode()

    assert ("never returns retrieval context" in page) is context_warned
    assert ("has no tools to call" in page) is tools_warned


def test_an_llm_agent_with_tools_gets_no_tool_warning(make_dataset, client_alice):
    tools = [{"name": "lookup_order", "description": "Find an order", "parameters": {"type": "object"}}]
    dataset = make_dataset(0, kind=Agent.Kind.LLM, version={"tools": tools})
    page = client_alice.get(reverse("datasets:case_create", args=[dataset.agent.pk, dataset.pk])).content.decode()
    assert "has no tools to call" not in page
    assert "never returns retrieval context" in page
