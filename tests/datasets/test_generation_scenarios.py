"""Generate with AI, kind "scenarios": cases with a simulated user's goal, plan and persona."""

import pytest
from django.urls import reverse

from datasets.generation.services import dataset_generate, dataset_generate_create
from datasets.models import Dataset
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def support_agent(team):
    return AgentFactory(
        team=team,
        name="Support bot",
        version__instructions="Refunds are possible within 30 days.\nAsk for the order number first.",
        version__guardrails="Never reveal another customer's account details.",
    )


def _scenario_case(question, rule="R1", **scenario):
    return {
        "question": question,
        "expected_answer": "The agent asks for the order number, then grants the refund.",
        "tests_rule": rule,
        "scenario": {
            "goal": "Get a refund",
            "plan": "Ask for a refund; give the order number A-1 when asked.",
            "persona": "A hurried customer",
            "success_criteria": "Asks for the order number before refunding.",
            "max_turns": 4,
            **scenario,
        },
    }


def test_scenarios_are_generated_with_their_goal_plan_and_persona(fake_llm, support_agent, alice):
    fake_llm.add_rule(
        task="generate",
        json={
            "cases": [
                _scenario_case("I want my money back for last week's order."),
                _scenario_case("Can you refund me? I have no order number.", rule="R2", max_turns=50),  # bad turns
                _scenario_case("Hello?", goal="", plan=""),  # neither goal nor plan
                _scenario_case("Refund please, it broke on day 3.", rule="R2", goal="Refund a broken item"),
            ]
        },
    )
    dataset = dataset_generate_create(
        agent=support_agent, user=alice, name="Refund scenarios", count=2, instructions="", kind="scenarios"
    )
    assert dataset.generation == {"count": 2, "instructions": "", "kind": "scenarios"}

    dataset_generate(dataset_id=dataset.pk)

    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY
    first, second = dataset.cases.order_by("position")
    assert first.question == "I want my money back for last week's order."
    assert first.scenario == {
        "goal": "Get a refund",
        "plan": "Ask for a refund; give the order number A-1 when asked.",
        "persona": "A hurried customer",
        "success_criteria": "Asks for the order number before refunding.",
        "max_turns": 4,
    }
    assert second.scenario["goal"] == "Refund a broken item"
    assert dataset.generation["dropped"] == {"no usable scenario": 2}
    request = next(r for r in fake_llm.requests if r.task == "generate")
    assert "These cases are SCENARIOS" in request.messages[0]["content"]
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert "scenario" in schema["properties"]["cases"]["items"]["required"]


def test_question_generation_asks_for_no_scenario(fake_llm, support_agent, alice):
    fake_llm.add_rule(
        task="generate",
        json={"cases": [{"question": "How long do refunds take?", "expected_answer": "30 days.", "tests_rule": "R1"}]},
    )
    dataset = dataset_generate_create(agent=support_agent, user=alice, name="Plain", count=1, instructions="")

    dataset_generate(dataset_id=dataset.pk)

    assert dataset.cases.get().scenario == {}
    request = next(r for r in fake_llm.requests if r.task == "generate")
    assert "SCENARIOS" not in request.messages[0]["content"]


def test_the_generate_tab_offers_scenarios_and_posts_the_kind(
    client_alice, support_agent, fake_llm, django_capture_on_commit_callbacks
):
    page = client_alice.get(reverse("datasets:new", args=[support_agent.pk]), {"tab": "generate"}).content.decode()
    assert 'name="kind" value="scenarios"' in page

    with django_capture_on_commit_callbacks():
        client_alice.post(
            reverse("datasets:generate", args=[support_agent.pk]),
            {"count": "3", "instructions": "", "name": "Sims", "kind": "scenarios"},
        )

    assert Dataset.objects.get().generation["kind"] == "scenarios"


def test_an_unknown_kind_is_refused_on_the_form(client_alice, support_agent, fake_llm):
    response = client_alice.post(
        reverse("datasets:generate", args=[support_agent.pk]),
        {"count": "3", "instructions": "", "name": "Sims", "kind": "poems"},
    )

    assert "Select a valid choice." in response.content.decode()
    assert not Dataset.objects.exists()
