"""What the agent is sent, read off the fake server: never the expected answer or anything else
that would give the test away (guideline, expected tools, expected context, expected turns)."""

import pytest

from agents.models import Agent
from runs import services
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

MARKERS = {
    "expected_answer": "Refunds take ZEBRA-7781 days",
    "judge_guideline": "Grade strictly GUIDELINE-5521",
    "expected_context": "CONTEXT-9934 is the refund section",
    "expected_tool": "ORDER-TOOL-4410",
    "expected_turn": "TURN-EXPECTED-6612",
}


def test_no_expected_answer_reaches_the_agent(make_dataset, alice, fake_llm):
    dataset = make_dataset(
        1,
        kind=Agent.Kind.LLM,
        expected_answer=MARKERS["expected_answer"],
        judge_guideline=MARKERS["judge_guideline"],
        expected_context=[MARKERS["expected_context"]],
        expected_tools=[{"name": "lookup_order", "args": {"order_id": MARKERS["expected_tool"]}}],
        turns=[{"user": "I bought the Team plan last week.", "expected": MARKERS["expected_turn"]}],
        smoke_count=1,
    )
    fake_llm.add_rule(task="paraphrase", reply="Paraphrased: how long is the refund window?")

    drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    to_agent = [r for r in fake_llm.requests if r.task in ("agent", "paraphrase")]
    to_judge = [r for r in fake_llm.requests if r.task == "judge"]
    assert len([r for r in to_agent if r.task == "agent"]) >= 2  # both turns, and the smoke-test variant
    for request in to_agent:
        for name, marker in MARKERS.items():
            assert marker not in request.text, f"the {name} reached the agent ({request.task})"
    # The markers are really in the data: the judge, who must see them, does.
    assert any(MARKERS["expected_answer"] in r.text for r in to_judge)
    assert any(MARKERS["judge_guideline"] in r.text for r in to_judge)
