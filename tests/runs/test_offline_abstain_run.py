"""A test plan whose expected results describe behaviour, run offline through the real engine
against the demo knowledge agent: no correct answer gets a failing verdict; what the offline
scorer cannot check is counted as "Needs a judge model", outside the pass rate."""

import pytest

from agents.models import Agent
from datasets.services import dataset_create
from evalsite.demo import KNOWLEDGE_AGENT, demo_load
from runs import services
from runs.models import Result, Run
from tests.factories import TestCaseFactory
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

# (question, expected result as a QA plan writes it). The demo knowledge answers every one right.
PLAN = [
    (
        "How long do I have to ask for a full refund?",
        "Agent explains a new subscription can be refunded in full within 30 days of the first payment, "
        "so the customer is eligible; directs them to Billing > Refund",
    ),
    (
        "I paid for a monthly plan 40 days ago. Can I still get a refund?",
        "Agent politely declines: the 30-day window has passed and monthly plans are not refunded after it.",
    ),
    ("When is your support team available?", "The bot states support answers Monday to Friday, 08:00 to 20:00 CET."),
    (
        "Is there a free trial, and do I need a credit card for it?",
        "Agent confirms there is a fourteen-day free trial.",
    ),
    ("Where is my data stored?", "Assistant reassures the customer and explains where the data is stored."),
]


def test_a_behavioural_plan_run_offline_fails_no_correct_answer(alice, no_llm):
    demo = demo_load()
    agent = Agent.objects.get(name=KNOWLEDGE_AGENT)
    dataset = dataset_create(agent=agent, user=demo.user, name="Refund UAT plan")
    for position, (question, expected) in enumerate(PLAN):
        TestCaseFactory(dataset=dataset, position=position, question=question, expected_answer=expected)

    run = drive(services.run_start(agent=agent, dataset=dataset, user=demo.user))

    assert run.status == Run.Status.COMPLETED and run.scorer == Run.Scorer.OFFLINE
    assert (run.passed, run.failed, run.errored, run.abstained) == (2, 0, 0, 3)
    assert run.pass_rate == 1.0  # 2 of the 2 it could check; the 3 it could not are left out
    assert run.average_score == 10
    results = {result.case.position: result for result in Result.objects.filter(run=run).select_related("case")}
    for position in (0, 1, 4):
        result = results[position]
        assert result.status == Result.Status.ABSTAINED and result.score is None
        assert result.verdict == "Needs a judge model"
        assert "Configure a judge model" in result.reasoning
    assert "“directs them to Billing > Refund”" in results[0].reasoning
    assert "Covered: “a new subscription can be refunded in full within 30 days" in results[0].reasoning
    assert [results[position].status for position in (2, 3)] == [Result.Status.PASS, Result.Status.PASS]
    assert "3 cases describe what the agent should do" in run.summary_note
