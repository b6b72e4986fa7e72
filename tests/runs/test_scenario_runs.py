"""Scenario cases in a run: a simulator model plays the user (runs/engine/simulator.py), the judge scores the whole."""

import csv
import io

import pytest
from django.urls import reverse

from agents.models import Agent
from runs import selectors, services
from runs.models import Result, Run
from runs.reports import exporters
from runs.services.start import NEEDS_SIMULATOR
from tests.agents.test_adapters import agent_server  # noqa: F401  (fixture)
from tests.factories import TestCaseFactory
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

SCENARIO = {
    "goal": "Get a refund for order A-1001",
    "plan": "Ask for a refund; when asked, give the order number; then confirm.",
    "persona": "An impatient customer.",
    "max_turns": 5,
    "success_criteria": "The agent asks for the order number before promising a refund.",
}
SCENARIO_JUDGE = {"score": 9, "failing_turn": 0, "reasoning": "The agent asked for the order and refunded it."}


def _start(dataset, user):
    return services.run_start(agent=dataset.agent, dataset=dataset, user=user)


def _say(message: str) -> dict:
    return {"action": "say", "message": message, "goal_reached": False, "reason": "Following the plan."}


def _end(reached: bool, reason: str) -> dict:
    return {"action": "end", "message": "", "goal_reached": reached, "reason": reason}


@pytest.fixture
def scenario_dataset(make_dataset):
    return make_dataset(
        1, kind=Agent.Kind.LLM, questions=["I want my money back."], scenario=SCENARIO, expected_answer=""
    )


def test_the_simulator_plays_the_user_until_the_goal_is_met(fake_llm, scenario_dataset, alice):
    fake_llm.add_rule(task="simulator", json=_say("It is order A-1001."), times=1)
    fake_llm.add_rule(task="simulator", json=_say("Yes, refund it to my card."), times=1)
    fake_llm.add_rule(task="simulator", json=_end(True, "The refund was confirmed."))
    fake_llm.add_rule(task="judge", json=SCENARIO_JUDGE)

    run = drive(_start(scenario_dataset, alice))

    result = Result.objects.get(run=run)
    assert result.status == Result.Status.PASS and result.score == 9
    users = [m["content"] for m in result.conversation if m["role"] == "user"]
    assert users == ["I want my money back.", "It is order A-1001.", "Yes, refund it to my card."]
    replies = [m["content"] for m in result.conversation if m["role"] == "assistant"]
    assert replies == [f"Fake answer to: {text}" for text in users]
    assert [m["turn"] for m in result.conversation] == [1, 1, 2, 2, 3, 3]
    assert all(isinstance(m["duration_ms"], int) for m in result.conversation)
    assert result.scenario == {
        "ended_by": "simulator",
        "goal": "reached",
        "reason": "The refund was confirmed.",
        "user_turns": 3,
        "max_turns": 5,
        "failing_turn": None,
    }
    # The agent is asked turn by turn with the conversation so far; the simulator after each reply.
    agent_calls = [r for r in fake_llm.requests if r.task == "agent"]
    assert len(agent_calls) == 3
    assert [m["role"] for m in agent_calls[2].messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert fake_llm.count(task="simulator", case=result.pk) == 3
    assert fake_llm.count(task="judge", case=result.pk) == 1
    # The simulator reads the goal, plan, persona and the conversation so far.
    last_prompt = [r for r in fake_llm.requests if r.task == "simulator"][-1].messages[-1]["content"]
    assert SCENARIO["goal"] in last_prompt and SCENARIO["persona"] in last_prompt
    assert "AGENT: Fake answer to: Yes, refund it to my card." in last_prompt
    assert "The user has sent 3 of at most 5 messages." in last_prompt
    # The judge sees the whole numbered conversation, the goal, the criteria and how it ended.
    judge_prompt = [r for r in fake_llm.requests if r.task == "judge"][0].messages[-1]["content"]
    assert "[turn 2] USER: It is order A-1001." in judge_prompt
    assert SCENARIO["success_criteria"] in judge_prompt
    assert "The user ended it (goal reached): The refund was confirmed." in judge_prompt


def test_the_simulators_tokens_and_cost_are_counted_apart_from_agent_and_judge(fake_llm, scenario_dataset, alice):
    fake_llm.add_rule(task="simulator", json=_end(False, "The agent would not help."))
    fake_llm.add_rule(task="judge", json={"score": 2, "failing_turn": 1, "reasoning": "Refused at once."})

    run = drive(_start(scenario_dataset, alice))

    result = Result.objects.get(run=run)
    simulator_call = next(r for r in fake_llm.requests if r.task == "simulator")
    usage = simulator_call.response["usage"]
    assert result.simulator_tokens == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    agent_usage = next(r for r in fake_llm.requests if r.task == "agent").response["usage"]
    assert result.agent_tokens == agent_usage["total_tokens"]
    judge_usage = next(r for r in fake_llm.requests if r.task == "judge").response["usage"]
    assert result.judge_tokens == judge_usage["total_tokens"]
    assert run.simulator_tokens == result.simulator_tokens
    summary_usage = next(r for r in fake_llm.requests if r.task == "summary").response["usage"]
    assert run.agent_tokens == result.agent_tokens
    assert run.judge_tokens == result.judge_tokens + summary_usage["total_tokens"]  # the summary is the judge's
    assert result.status == Result.Status.FAIL
    assert result.scenario["goal"] == "abandoned" and result.scenario["failing_turn"] == 1


def test_the_conversation_ends_at_the_turn_limit(fake_llm, make_dataset, alice):
    dataset = make_dataset(1, kind=Agent.Kind.LLM, scenario={**SCENARIO, "max_turns": 3})
    fake_llm.add_rule(task="simulator", json=_say("Still waiting for my refund."))
    fake_llm.add_rule(task="judge", json={"score": 5, "failing_turn": 2, "reasoning": "It went in circles."})

    run = drive(_start(dataset, alice))

    result = Result.objects.get(run=run)
    assert fake_llm.count(task="agent") == 3
    assert fake_llm.count(task="simulator") == 2  # never asked after the last allowed turn
    assert [m["role"] for m in result.conversation] == ["user", "assistant"] * 3
    assert result.scenario["ended_by"] == "turn_limit"
    assert result.scenario["reason"] == "The turn limit (3 user messages) was reached."
    assert result.scenario["failing_turn"] == 2
    assert result.status == Result.Status.FAIL


def test_a_simulator_error_is_an_error_result_with_its_message(fake_llm, scenario_dataset, alice):
    fake_llm.add_rule(task="simulator", status=400, error="The simulator's prompt is malformed.")

    run = drive(_start(scenario_dataset, alice))

    result = Result.objects.get(run=run)
    assert result.status == Result.Status.ERROR
    assert result.error.startswith("The user simulator failed: ")
    assert "The simulator's prompt is malformed." in result.error
    assert [m["role"] for m in result.conversation] == ["user", "assistant"]  # what happened before is kept
    assert fake_llm.count(task="judge") == 0
    assert run.status == Run.Status.COMPLETED and run.errored == 1


def test_a_simulator_that_says_nothing_is_an_error(fake_llm, scenario_dataset, alice):
    fake_llm.add_rule(task="simulator", json=_say("  "))

    run = drive(_start(scenario_dataset, alice))

    result = Result.objects.get(run=run)
    assert result.status == Result.Status.ERROR
    assert result.error == "The user simulator failed: its answer said to reply but held no message."


def test_tool_calls_are_kept_on_the_turn_that_made_them(fake_llm, make_dataset, alice):
    tools = [
        {
            "name": "lookup_order",
            "description": "Find an order",
            "result": '{"status": "paid"}',
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        }
    ]
    dataset = make_dataset(
        1,
        kind=Agent.Kind.LLM,
        version={"tools": tools},
        scenario=SCENARIO,
        expected_tools=[{"name": "lookup_order", "args": {}}],
    )
    fake_llm.add_rule(task="simulator", json=_say("A-1001"), times=1)
    fake_llm.add_rule(task="simulator", json=_end(True, "Refunded."))
    fake_llm.add_rule(task="agent", reply="Which order?", times=1)
    fake_llm.add_rule(task="agent", tool_calls=[{"name": "lookup_order", "arguments": {"order_id": "A-1001"}}], times=1)
    fake_llm.add_rule(task="agent", reply="Refunded.")
    fake_llm.add_rule(task="judge", json=SCENARIO_JUDGE)

    run = drive(_start(dataset, alice))

    result = Result.objects.get(run=run)
    replies = [m for m in result.conversation if m["role"] == "assistant"]
    assert [m["tool_calls"] for m in replies] == [[], [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]]
    assert result.tool_calls == [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]
    assert {row["name"]: row["passed"] for row in result.scorers} == {"trajectory": True}
    assert result.status == Result.Status.PASS


def test_an_http_agent_gets_one_idempotency_key_per_turn(fake_llm, make_dataset, alice, agent_server):  # noqa: F811
    dataset = make_dataset(1, kind=Agent.Kind.HTTP, version={"http_url": agent_server.url}, scenario=SCENARIO)
    fake_llm.add_rule(task="simulator", json=_say("A-1001"), times=1)
    fake_llm.add_rule(task="simulator", json=_end(True, "Done."))
    fake_llm.add_rule(task="judge", json=SCENARIO_JUDGE)

    run = drive(_start(dataset, alice))

    result = Result.objects.get(run=run)
    base = f"evalsite-run{run.pk}-case{result.case_id}-repeat0-variant0"
    assert [headers["Idempotency-Key"] for headers in agent_server.headers] == [f"{base}-turn1", f"{base}-turn2"]
    assert [body["question"] for body in agent_server.received] == [result.question, "A-1001"]
    assert agent_server.received[1]["conversation"] == [
        {"role": "user", "content": result.question},
        {"role": "assistant", "content": "ok"},
    ]


def test_without_a_model_scenario_cases_are_skipped_and_the_rest_of_the_run_goes_on(no_llm, make_dataset, alice):
    dataset = make_dataset(2)
    TestCaseFactory(dataset=dataset, position=2, question="I want my money back.", scenario=SCENARIO)

    run = drive(_start(dataset, alice))

    assert run.status == Run.Status.COMPLETED
    assert (run.total, run.completed, run.passed, run.failed, run.errored) == (2, 2, 2, 0, 0)
    assert run.pass_rate == 1.0  # a skipped scenario is no failure
    assert selectors.run_main_total(run=run) == 2  # what the CI gate (evalrun) divides by
    counts = selectors.run_counts(run=run, outcomes=selectors.case_outcome_list(run=run))
    assert (counts.requests, counts.skipped, counts.pass_rate) == (2, 0, 1.0)
    skipped = Result.objects.get(run=run, case__position=2)
    assert skipped.status == Result.Status.SKIPPED
    assert skipped.error == NEEDS_SIMULATOR
    assert skipped.error.startswith("Needs a simulator model")


def test_a_run_of_only_scenarios_without_a_model_still_completes(
    no_llm, make_dataset, alice, django_capture_on_commit_callbacks
):
    dataset = make_dataset(2, scenario=SCENARIO)

    with django_capture_on_commit_callbacks() as callbacks:
        run = _start(dataset, alice)

    assert run.total == 0
    assert len(callbacks) == 1  # run_finish, since no case will ever end the run
    services.run_finish(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert set(Result.objects.filter(run=run).values_list("status", flat=True)) == {Result.Status.SKIPPED}


# ---- the result card, the run page and the exports ---------------------------------------


def _played_run(fake_llm, scenario_dataset, alice):
    fake_llm.add_rule(task="simulator", json=_say("It is order A-1001."), times=1)
    fake_llm.add_rule(task="simulator", json=_end(False, "The agent kept asking the same question."))
    fake_llm.add_rule(task="judge", json={"score": 3, "failing_turn": 2, "reasoning": "It ignored the order number."})
    return drive(_start(scenario_dataset, alice))


def test_the_result_card_shows_the_chat_who_ended_it_and_where_it_went_wrong(
    client_alice, fake_llm, scenario_dataset, alice
):
    run = _played_run(fake_llm, scenario_dataset, alice)

    html = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk])).content.decode()

    assert "<h4>Simulated conversation" in html and "2 of at most 5 user turns" in html
    assert html.count('class="chat-msg chat-user"') == 2
    assert html.count("chat-msg chat-agent") == 2
    assert '<li class="chat-msg chat-agent chat-failing">' in html and "Went wrong here" in html
    assert "Ended by the simulated user: gave up</strong> — The agent kept asking the same question." in html
    assert "The judge says the conversation went wrong at turn 2." in html
    assert SCENARIO["goal"] in html
    assert "Conversation before the last question" not in html  # the chat replaces the scripted layout
    assert '<span class="muted">simulator</span>' in html  # the run's cost, simulator apart


def test_a_skipped_scenario_card_says_it_needs_a_simulator_model(client_alice, no_llm, make_dataset, alice):
    dataset = make_dataset(1)
    TestCaseFactory(dataset=dataset, position=1, question="I want my money back.", scenario=SCENARIO)
    run = drive(_start(dataset, alice))

    html = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk]), {"status": "not_run"}).content
    html = html.decode()

    assert '<span class="badge badge-skipped">Needs a simulator model</span>' in html
    assert NEEDS_SIMULATOR in html


def test_the_exports_carry_the_scenario_and_the_simulators_spend(fake_llm, scenario_dataset, alice):
    run = _played_run(fake_llm, scenario_dataset, alice)

    data = exporters.run_export_data(run)
    (result,) = data["results"]
    assert data["run"]["simulator_tokens"] == run.simulator_tokens > 0
    assert result["simulator_tokens"] == run.simulator_tokens
    assert result["scenario"]["failing_turn"] == 2 and result["scenario"]["goal"] == "abandoned"
    assert result["conversation"][1]["role"] == "assistant" and "duration_ms" in result["conversation"][1]
    header, row = list(csv.reader(io.StringIO(exporters.run_export_csv(run))))[:2]
    assert row[header.index("simulator_tokens")] == str(run.simulator_tokens)
    report = exporters.run_export_html(run)
    assert "<h4>Simulated conversation · 2 of at most 5 user turns</h4>" in report
    assert "Ended by the simulated user: gave up</strong> — The agent kept asking the same question." in report
    assert "went wrong here" in report and "<dt>Simulator cost</dt>" in report


def test_the_export_pass_rate_leaves_out_scenarios_no_model_could_play(no_llm, make_dataset, alice):
    dataset = make_dataset(1)
    TestCaseFactory(dataset=dataset, position=1, question="I want my money back.", scenario=SCENARIO)
    run = drive(_start(dataset, alice))

    figures = exporters.run_export_data(run)["run"]

    assert figures["pass_rate"] == 1.0 and figures["needs_simulator"] == 1 and figures["skipped"] == 0


def test_the_api_gives_the_scenario_and_the_simulators_spend(client, fake_llm, scenario_dataset, alice):
    from accounts.services import api_token_create

    run = _played_run(fake_llm, scenario_dataset, alice)
    _, raw = api_token_create(user=alice, name="ci")

    body = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {raw}").json()

    assert body["simulator_tokens"] == run.simulator_tokens > 0
    (result,) = body["results"]
    assert result["scenario"]["ended_by"] == "simulator" and result["scenario"]["failing_turn"] == 2
    assert result["simulator_tokens"] == run.simulator_tokens
    assert [m["turn"] for m in result["conversation"]] == [1, 1, 2, 2]


def test_an_agent_error_mid_conversation_is_the_agents_not_the_simulators(fake_llm, scenario_dataset, alice):
    fake_llm.add_rule(task="simulator", json=_say("It is order A-1001."))
    fake_llm.add_rule(task="agent", reply="Which order?", times=1)
    fake_llm.add_rule(task="agent", status=400, error="This model's maximum context length is 8 tokens.")

    run = drive(_start(scenario_dataset, alice))

    result = Result.objects.get(run=run)
    assert result.status == Result.Status.ERROR
    assert result.error == "The conversation is longer than the model's context window."  # the agent's model
    assert not result.error.startswith("The user simulator failed")
    assert [m["role"] for m in result.conversation] == ["user", "assistant", "user"]
    assert result.scenario["user_turns"] == 2
