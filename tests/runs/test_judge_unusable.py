"""A judge answer that fails its checks (runs/judging/checks.py) is asked once more and, still
unusable, makes the result an Error "Judge answer unusable", never a pass or a fail (issue 33).
Driven through the engine against the fake server, which answers as the small models did."""

import pytest

from agents.models import Agent
from runs import services
from runs.models import Result
from tests.fakellm import CONTRADICTING_JUDGE
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

PLACEHOLDER = "<2-4 short sentences: what was right, what was missing or wrong>"


def _run(dataset, alice):
    return drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))


def _spent(fake_llm, run, task="judge") -> int:
    calls = [r for r in fake_llm.requests if r.task == task and r.trace.get("run") == str(run.pk)]
    return sum(r.response["usage"]["prompt_tokens"] + r.response["usage"]["completion_tokens"] for r in calls)


def test_placeholder_reasoning_gives_no_verdict(make_dataset, alice, fake_llm):
    # Gemma 3 270M's answers: the prompt's own template as the reasoning, scores of 10 and 0.
    dataset = make_dataset(3, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="judge", contains="Question 01", placeholder=True, json={"score": 10})
    fake_llm.add_rule(task="judge", placeholder=True, json={"score": 0})

    run = _run(dataset, alice)

    results = list(Result.objects.filter(run=run))
    assert [r.status for r in results] == [Result.Status.ERROR] * 3
    assert {r.error_kind for r in results} == {Result.ErrorKind.JUDGE_UNUSABLE}
    assert all(r.error.startswith("Judge answer unusable: its reasoning is a placeholder") for r in results)
    assert all(PLACEHOLDER in r.error for r in results)
    assert all(r.score is None and r.verdict == "" for r in results)
    assert (run.passed, run.failed, run.errored) == (0, 0, 3)
    # Each case's judge was asked twice, the second time marked as the check's retry.
    assert fake_llm.count("judge", run=run.pk) == 6
    assert [r.trace.get("judge_check_retry") for r in fake_llm.requests if r.task == "judge"][:2] == [None, "1"]
    # Both answers' spend is the judge's.
    assert sum(r.judge_tokens for r in results) == _spent(fake_llm, run) > 0


def test_the_placeholder_answer_echoes_the_prompts_template(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="judge", placeholder=True, json={"score": 10})

    _run(dataset, alice)

    judge = next(r for r in fake_llm.requests if r.task == "judge")
    assert judge.response["choices"][0]["message"]["content"] == f'{{"score": 10, "reasoning": "{PLACEHOLDER}"}}'


def test_a_usable_second_answer_counts(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="judge", json=CONTRADICTING_JUDGE, times=1)
    fake_llm.add_rule(task="judge", json={"score": 9, "reasoning": "States the 30-day window correctly."})

    run = _run(dataset, alice)

    result = Result.objects.get(run=run)
    assert (result.status, result.score, result.error_kind) == (Result.Status.PASS, 9, "")
    assert result.reasoning == "States the 30-day window correctly."
    assert fake_llm.count("judge", run=run.pk) == 2
    assert result.judge_tokens == _spent(fake_llm, run)  # the unusable first answer's tokens too


def test_reasoning_against_its_score_is_unusable(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="judge", json={"score": 10, "reasoning": "The answer is not correct"})

    run = _run(dataset, alice)

    result = Result.objects.get(run=run)
    assert (result.status, result.error_kind) == (Result.Status.ERROR, Result.ErrorKind.JUDGE_UNUSABLE)
    assert result.error == (
        "Judge answer unusable: its reasoning finds the answer wrong but its score says the opposite "
        "(“The answer is not correct”, 10/10)."
    )
    assert run.passed == 0


def test_the_demo_criteria_parroted_back_are_unusable(make_dataset, alice, fake_llm):
    criteria = "The answer must state the specific facts of the expected answer: amounts, percentages, time limits."
    dataset = make_dataset(1, kind=Agent.Kind.LLM, dataset={"evaluation_criteria": criteria})
    fake_llm.add_rule(task="judge", json={"score": 0, "reasoning": criteria})

    result = Result.objects.get(run=_run(dataset, alice))

    assert result.error_kind == Result.ErrorKind.JUDGE_UNUSABLE
    assert "repeats the instructions" in result.error


def test_other_judge_failures_are_judge_errors_and_agent_failures_agent_errors(make_dataset, alice, fake_llm):
    dataset = make_dataset(2, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="agent", contains="Question 01", status=400, error="Bad request from the agent model")
    fake_llm.add_rule(task="judge", status=400, error="The judge model refused")

    run = _run(dataset, alice)

    first, second = Result.objects.filter(run=run).order_by("case__position")
    assert (first.status, first.error_kind) == (Result.Status.ERROR, Result.ErrorKind.AGENT)
    assert (second.status, second.error_kind) == (Result.Status.ERROR, Result.ErrorKind.JUDGE)
    # A failed call is not an unusable answer: the check's retry never happens.
    assert not [r for r in fake_llm.requests if r.trace.get("judge_check_retry")]


def test_an_unusable_resample_is_dropped_not_counted(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)  # threshold 7, 2 re-samples
    fake_llm.add_rule(task="judge", json={"score": 7, "reasoning": "Right window, fee not mentioned."}, times=1)
    fake_llm.add_rule(task="judge", placeholder=True, json={"score": 0}, times=1)
    fake_llm.add_rule(task="judge", json={"score": 8, "reasoning": "Every fact is there."})

    run = _run(dataset, alice)

    result = Result.objects.get(run=run)
    assert result.judge_samples == [7, 8]
    assert (result.status, result.score) == (Result.Status.PASS, 7.5)
    assert fake_llm.count("judge", run=run.pk) == 3  # the unusable re-sample is not asked again
    assert result.judge_tokens == _spent(fake_llm, run)
