"""A scenario case's result card in a real browser, at 1280 and 390 px: the simulated chat
turn by turn, the turn the judge flagged, who ended it and why. The conversation is the
engine's own (runs.engine.case.execute against the fake LLM server), saved as the worker would."""

from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.models import Agent, AgentVersion
from runs.engine import case as engine
from runs.models import Result, Run
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.e2e
SHOTS = Path("/work/shots/k21-scenarios")
SCENARIO = {
    "goal": "Get a refund for order A-1001, which arrived broken",
    "plan": "Ask for a refund. Give the order number only when asked. Refuse a voucher once, then accept a refund.",
    "persona": "An impatient customer typing on a phone.",
    "max_turns": 6,
    "success_criteria": "The agent asks for the order number before promising anything, and offers the refund.",
}


def _say(message):
    return {"action": "say", "message": message, "goal_reached": False, "reason": "Following the plan."}


@pytest.fixture
def scenario_run(transactional_db, team, fake_llm):
    agent = AgentFactory(team=team, name="Support bot", kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="agent", reply="I'm sorry to hear that. Could you give me the order number?", times=1)
    fake_llm.add_rule(task="agent", reply="Thanks. I can offer a 20% voucher for your next order.", times=1)
    fake_llm.add_rule(task="agent", reply="Understood. I've issued a full refund of $49 for A-1001.", times=1)
    fake_llm.add_rule(task="simulator", json=_say("it's A-1001"), times=1)
    fake_llm.add_rule(task="simulator", json=_say("no voucher. i want my money back"), times=1)
    fake_llm.add_rule(
        task="simulator",
        json={"action": "end", "message": "", "goal_reached": True, "reason": "The refund was issued."},
    )
    fake_llm.add_rule(
        task="judge",
        json={
            "score": 6,
            "failing_turn": 2,
            "reasoning": "The agent asked for the order number first, but offered a voucher instead of the "
            "refund the policy allows; it refunded only when the user insisted.",
        },
    )
    run = build_run(
        agent=agent,
        cases=[
            CaseSpec(
                question="My order arrived broken and I want my money back.", expected="", data={"scenario": SCENARIO}
            ),
            CaseSpec(question="How long is the refund window?"),
        ],
        scorer=Run.Scorer.LLM,
        judge_model="openai/fake-judge",
    )
    result = Result.objects.select_related("case", "run__agent").get(run=run, case__position=0)
    outcome = engine.execute(result, run, AgentVersion.objects.select_related("agent").get(pk=agent.current_version_id))
    assert outcome.status == Result.Status.FAIL, outcome.error
    Result.objects.filter(pk=result.pk).update(
        status=outcome.status, actual_answer=outcome.actual_answer, conversation=outcome.conversation,
        tool_calls=outcome.tool_calls, score=outcome.score, verdict=outcome.verdict, reasoning=outcome.reasoning,
        scorers=outcome.scorers, scenario=outcome.scenario, duration_ms=outcome.duration_ms,
        agent_tokens=outcome.agent_tokens, judge_tokens=outcome.judge_tokens,
        simulator_tokens=outcome.simulator_tokens, simulator_cost=Decimal("0.0012"),
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(
        passed=1, failed=1, score_total=9 + outcome.score, average_score=(9 + outcome.score) / 2,
        simulator_tokens=outcome.simulator_tokens, simulator_cost=Decimal("0.0012"),
    )  # fmt: skip
    return run


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_scenario_card_shows_the_chat_and_how_it_ended(page, login, live_server, alice, scenario_run, viewport):
    SHOTS.mkdir(parents=True, exist_ok=True)
    name = "desktop" if viewport == DESKTOP else "phone"
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{scenario_run.agent_id}/runs/{scenario_run.pk}/")

    card = page.locator(".result-card").first
    card.locator("summary").click()
    chat = card.locator(".scenario-chat")
    expect(chat.locator(".chat-user")).to_have_count(3)
    expect(chat.locator(".chat-agent")).to_have_count(3)
    expect(chat.locator(".chat-failing")).to_contain_text("Went wrong here")
    expect(card.locator(".scenario-ending")).to_contain_text("Ended by the simulated user: goal reached")
    # Nothing overflows the card sideways on a phone.
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= viewport["width"], width
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(SHOTS / f"scenario-card-{name}.png"))
    page.screenshot(path=str(SHOTS / f"run-page-{name}.png"), full_page=True)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_scenario_case_is_written_in_the_case_form_and_badged_on_the_dataset_page(
    page, login, live_server, alice, team, no_llm, viewport
):
    from tests.factories import DatasetFactory

    SHOTS.mkdir(parents=True, exist_ok=True)
    name = "desktop" if viewport == DESKTOP else "phone"
    dataset = DatasetFactory(agent=AgentFactory(team=team, name="Support bot"), name="Refund scenarios")
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{dataset.agent_id}/datasets/{dataset.pk}/")

    page.get_by_role("link", name="Add test case").first.click()
    page.get_by_label("Question").fill("My order arrived broken and I want my money back.")
    page.locator("details.advanced summary").click()
    page.get_by_label("User's goal").fill(SCENARIO["goal"])
    page.get_by_label("Conversation plan").fill(SCENARIO["plan"])
    page.get_by_label("Maximum turns").fill("6")
    page.locator("fieldset.scenario-fields").screenshot(path=str(SHOTS / f"case-form-scenario-{name}.png"))
    page.get_by_role("button", name="Add test case").click()

    item = page.locator(".case-item").first
    expect(item.locator(".case-scenario")).to_contain_text(SCENARIO["goal"])
    expect(item.locator(".case-scenario")).to_contain_text("up to 6 turns")
    item.screenshot(path=str(SHOTS / f"dataset-case-{name}.png"))
