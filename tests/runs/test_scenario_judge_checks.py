"""A scenario case's judge (runs/judging/scenario.py) gets the same checks as a scripted case's:
an unusable answer is asked once more, then the result is "Judge answer unusable"; and the judge
is told when an agent reply ended at its token limit (issue 33)."""

import pytest

from runs.models import Result
from tests.runs.conftest import drive
from tests.runs.test_scenario_runs import _end, _start, scenario_dataset  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db

PLACEHOLDER = "<2-4 short sentences: what went right, what went wrong and where>"


def test_a_scenario_judge_answering_placeholders_gives_no_verdict(fake_llm, scenario_dataset, alice):  # noqa: F811
    fake_llm.add_rule(task="simulator", json=_end(True, "Done."))
    fake_llm.add_rule(task="judge", placeholder=True, json={"score": 10, "failing_turn": 0})

    run = drive(_start(scenario_dataset, alice))

    result = Result.objects.get(run=run)
    assert (result.status, result.error_kind) == (Result.Status.ERROR, Result.ErrorKind.JUDGE_UNUSABLE)
    assert result.error.startswith("Judge answer unusable:") and PLACEHOLDER in result.error
    assert result.score is None and run.passed == run.failed == 0
    assert fake_llm.count("judge", run=run.pk) == 2


def test_a_scenario_judge_is_told_of_a_cut_reply(fake_llm, scenario_dataset, alice, settings):  # noqa: F811
    settings.EVALSITE_LLM_MAX_TOKENS = {**settings.EVALSITE_LLM_MAX_TOKENS, "agent": 64}
    fake_llm.add_rule(task="agent", reply="Sure, I can refund", finish_reason="length")
    fake_llm.add_rule(task="simulator", json=_end(True, "Done."))
    fake_llm.add_rule(task="judge", json={"score": 8, "failing_turn": 0, "reasoning": "Refunded the order."})

    run = drive(_start(scenario_dataset, alice))

    result = Result.objects.get(run=run)
    assert result.cut == [{"call": "agent", "limit": 64, "turn": 1}]
    prompt = next(r for r in fake_llm.requests if r.task == "judge").messages[-1]["content"]
    assert "Note: the agent's reply ended at its length limit of 64 tokens in turn 1" in prompt
