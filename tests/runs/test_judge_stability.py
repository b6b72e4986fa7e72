"""Judge stability near the line (issue 18, section 3): a score next to the threshold is asked
again as many times as the dataset says, counted at the fake server; the median counts, the
verdict is marked stable or unstable, and every call's tokens are the judge's."""

import pytest
from django.urls import reverse

from agents.models import Agent
from runs import services
from runs.judging import stability
from runs.models import Result
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


def _judge_scores(fake_llm, *scores: int) -> None:
    """The judge answers these scores in turn (each once), then 9 forever."""
    for score in scores:
        fake_llm.add_rule(task="judge", json={"score": score, "reasoning": f"Scored {score}."}, times=1)
    fake_llm.add_rule(task="judge", json={"score": 9, "reasoning": "Scored 9."})


def _run(dataset, alice):
    return drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))


def _judge_tokens_seen(fake_llm, run) -> int:
    calls = [r for r in fake_llm.requests if r.task == "judge" and r.trace.get("run") == str(run.pk)]
    return sum(r.response["usage"]["prompt_tokens"] + r.response["usage"]["completion_tokens"] for r in calls)


def test_a_score_next_to_the_threshold_is_asked_twice_more_and_the_median_counts(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)  # threshold 7, 2 re-samples: the defaults
    _judge_scores(fake_llm, 7, 6, 8)

    run = _run(dataset, alice)

    result = Result.objects.get(run=run)
    assert fake_llm.count("judge", run=run.pk) == 3
    assert [r.trace.get("judge_sample") for r in fake_llm.requests if r.task == "judge"] == [None, "2", "3"]
    assert result.judge_samples == [7, 6, 8]
    assert result.score == 7 and result.status == Result.Status.PASS
    assert result.judge_stable is False  # the 6 fails: which sample counted decides the verdict
    assert result.reasoning == "Scored 7."
    assert result.judge_tokens == _judge_tokens_seen(fake_llm, run) > 0
    assert run.judge_tokens >= result.judge_tokens


def test_samples_on_one_side_of_the_line_are_stable(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    _judge_scores(fake_llm, 6, 5, 6)

    result = Result.objects.get(run=_run(dataset, alice))

    assert result.judge_samples == [6, 5, 6]
    assert (result.score, result.status, result.judge_stable) == (6, Result.Status.FAIL, True)


def test_a_score_away_from_the_line_is_asked_once(make_dataset, alice, fake_llm):
    dataset = make_dataset(2, kind=Agent.Kind.LLM)
    _judge_scores(fake_llm, 8, 5)  # 8 passes at 7 and 5 fails, whatever one point changes

    run = _run(dataset, alice)

    assert fake_llm.count("judge", run=run.pk) == 2
    assert list(Result.objects.filter(run=run).values_list("judge_samples", "judge_stable")) == [([], None)] * 2


@pytest.mark.parametrize("resamples, calls", [(0, 1), (1, 2), (4, 5)])
def test_the_dataset_sets_how_many_extra_calls_are_made(make_dataset, alice, fake_llm, resamples, calls):
    dataset = make_dataset(1, kind=Agent.Kind.LLM, dataset={"judge_resamples": resamples})
    fake_llm.add_rule(task="judge", json={"score": 7, "reasoning": "On the line."})

    run = _run(dataset, alice)

    result = Result.objects.get(run=run)
    assert fake_llm.count("judge", run=run.pk) == calls
    assert result.judge_samples == ([7] * calls if calls > 1 else [])
    assert result.judge_stable == (True if calls > 1 else None)


def test_a_failed_re_sample_keeps_the_first_judgment_and_counts_its_cost(make_dataset, alice, fake_llm, settings):
    settings.EVALSITE_LLM_RETRIES = 0
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="judge", json={"score": 7, "reasoning": "On the line."}, times=1)
    fake_llm.add_rule(task="judge", status=401)  # not retried: the re-sampling stops there

    run = _run(dataset, alice)

    result = Result.objects.get(run=run)
    assert fake_llm.count("judge", run=run.pk) == 2
    assert (result.status, result.score, result.judge_samples, result.judge_stable) == ("pass", 7, [], None)


def test_the_line_is_where_one_point_changes_the_verdict():
    assert [score for score in range(11) if stability.near_threshold(score, 7)] == [6, 7]
    assert stability.near_threshold(7.5, 7) and not stability.near_threshold(8, 7)
    assert stability.median_score([7, 8]) == 7.5
    assert stability.is_stable([7, 9, 10], 7) and not stability.is_stable([6.5, 7], 7)


def test_the_card_shows_the_samples_and_the_verdicts_stability(make_dataset, alice, fake_llm, client_alice):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    _judge_scores(fake_llm, 7, 6, 8)
    run = _run(dataset, alice)

    page = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk])).content.decode()

    assert "Near the pass line" in page and "Unstable" in page
    assert 'class="judge-sample is-pass">7<' in page and 'class="judge-sample is-fail">6<' in page
    assert "Asked 3 times" in page
