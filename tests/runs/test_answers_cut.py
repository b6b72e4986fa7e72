"""Answers that ended at their token limit (finish_reason "length") are recorded on the result
(Result.cut), the judge is told the agent's answer was cut, and a cut judge answer says so
(issue 33, section 3). Through the engine, against the fake server."""

import pytest

from agents.models import Agent
from runs import services
from runs.judging.scoring import CUT_NOTE
from runs.models import Result
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

AGENT_LIMIT = 64
NOTE = CUT_NOTE.format(of_limit=f" of {AGENT_LIMIT} tokens")


@pytest.fixture
def agent_limit(settings):
    settings.EVALSITE_LLM_MAX_TOKENS = {**settings.EVALSITE_LLM_MAX_TOKENS, "agent": AGENT_LIMIT}


def _run(dataset, alice):
    return drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))


def _judge_prompts(fake_llm, run) -> list[str]:
    return [r.messages[-1]["content"] for r in fake_llm.requests if r.task == "judge" and r.trace["run"] == str(run.pk)]


def test_agent_answers_cut_at_their_limit_are_recorded_and_the_judge_is_told(
    make_dataset, alice, fake_llm, agent_limit
):
    dataset = make_dataset(3, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="agent", reply="Refunds are possible within", finish_reason="length")

    run = _run(dataset, alice)

    results = list(Result.objects.filter(run=run))
    assert [r.cut for r in results] == [[{"call": "agent", "limit": AGENT_LIMIT}]] * 3
    assert [r.actual_answer for r in results] == ["Refunds are possible within"] * 3
    prompts = _judge_prompts(fake_llm, run)
    assert len(prompts) == 3 and all(prompt.endswith(NOTE) for prompt in prompts)
    # The agent's request went out with that limit.
    agent = next(r for r in fake_llm.requests if r.task == "agent")
    assert agent.body["max_tokens"] == AGENT_LIMIT


def test_an_answer_longer_than_the_limit_is_cut_by_the_server_and_recorded(make_dataset, alice, fake_llm, agent_limit):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="agent", reply="Refunds are possible within thirty days. " * 40)

    result = Result.objects.get(run=_run(dataset, alice))

    assert result.cut == [{"call": "agent", "limit": AGENT_LIMIT}]
    assert len(result.actual_answer) == AGENT_LIMIT * 4  # the fake's four characters a token


def test_an_answer_that_ended_on_its_own_is_not_marked_and_the_judge_is_not_told(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)

    run = _run(dataset, alice)

    assert Result.objects.get(run=run).cut == []
    assert "length limit" not in _judge_prompts(fake_llm, run)[0]


def test_each_cut_turn_of_a_multi_turn_case_is_recorded(make_dataset, alice, fake_llm, agent_limit):
    dataset = make_dataset(1, kind=Agent.Kind.LLM, turns=[{"user": "Hello, I bought a plan.", "expected": ""}])
    fake_llm.add_rule(task="agent", contains="Question 01", reply="Refunds are", finish_reason="length")

    run = _run(dataset, alice)

    assert Result.objects.get(run=run).cut == [{"call": "agent", "limit": AGENT_LIMIT, "turn": 2}]
    assert _judge_prompts(fake_llm, run)[0].endswith(NOTE)


def test_a_judge_answer_cut_before_its_json_closed_is_an_error_that_says_so(make_dataset, alice, fake_llm, settings):
    settings.EVALSITE_LLM_MAX_TOKENS = {**settings.EVALSITE_LLM_MAX_TOKENS, "judge": 50}
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="judge", runaway=True)

    result = Result.objects.get(run=_run(dataset, alice))

    assert (result.status, result.error_kind) == (Result.Status.ERROR, Result.ErrorKind.JUDGE)
    assert "cut at 50 tokens" in result.error
    assert result.cut == [{"call": "judge", "limit": 50}]


def test_a_judge_answer_that_ended_at_its_limit_but_parsed_counts_and_is_marked(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="judge", json={"score": 9, "reasoning": "All facts."}, finish_reason="length")

    result = Result.objects.get(run=_run(dataset, alice))

    limit = next(r for r in fake_llm.requests if r.task == "judge").body["max_tokens"]
    assert result.status == Result.Status.PASS
    assert result.cut == [{"call": "judge", "limit": limit}]


def test_a_rescore_keeps_the_agents_cut_and_tells_the_judge(make_dataset, alice, fake_llm, agent_limit):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="agent", reply="Refunds are", finish_reason="length")
    first = _run(dataset, alice)

    child = drive(services.run_rescore(run=first, user=alice))

    assert Result.objects.get(run=child).cut == [{"call": "agent", "limit": AGENT_LIMIT}]
    assert _judge_prompts(fake_llm, child)[0].endswith(NOTE)
