"""Scoring production traces with the runs' judge (issue 47, point 3): the judge configuration is
recorded on each score, a judge that failed (or has not had) its preflight never scores, and a
judge answer that fails its checks is unusable, never a score. Against the fake model server."""

from decimal import Decimal

import pytest

from monitoring.models import OnlineScore
from monitoring.online import reaper, scoring
from monitoring.online.scoring import (
    PREFLIGHT_FAILED,
    PREFLIGHT_PENDING,
    evaluator_judge_config,
    online_score_run,
)
from runs.services.preflight import judge_config_preflight
from tests.fakellm import CONTRADICTING_JUDGE
from tests.monitoring.online_helpers import evaluator_for, pending, preflighted

pytestmark = pytest.mark.django_db


def test_a_score_records_the_judge_configuration_that_made_it(agent, fake_llm):
    evaluator = evaluator_for(agent)
    config = preflighted(fake_llm, evaluator)
    (score,) = pending(evaluator, question="Where is my parcel 4411?")

    score = online_score_run(score_id=score.pk)

    assert (score.status, score.score, score.passed, score.judge_config) == ("scored", 8, True, config)
    assert score.reasoning and score.tokens > 0 and score.scored_at
    (request,) = [r for r in fake_llm.requests if r.trace.get("online_score") == str(score.pk)]
    assert "Where is my parcel 4411?" in request.text
    assert "The answer is correct and helpful." in request.text  # the evaluator's criteria
    assert "nobody wrote an expected answer" in request.text


def test_a_score_is_made_once_however_often_its_message_comes(agent, fake_llm):
    evaluator = evaluator_for(agent)
    preflighted(fake_llm, evaluator)
    (score,) = pending(evaluator)

    assert online_score_run(score_id=score.pk) is not None
    assert online_score_run(score_id=score.pk) is None

    assert fake_llm.count("judge", online_score=score.pk) == 1


def test_a_judge_that_failed_its_preflight_scores_nothing(agent, fake_llm):
    evaluator = evaluator_for(agent)
    fake_llm.add_rule(task="judge", json={"score": 5, "reasoning": "Some of it is right and some is not."})
    config = judge_config_preflight(config=evaluator_judge_config(evaluator))
    assert config.preflight_status == "failed"
    scores = pending(evaluator, 3)

    done = [online_score_run(score_id=score.pk) for score in scores]

    assert [(s.status, s.error, s.score, s.judge_config) for s in done] == [
        ("skipped", PREFLIGHT_FAILED, None, config)
    ] * 3
    assert sum(fake_llm.count("judge", online_score=score.pk) for score in scores) == 0


def test_scores_wait_for_a_judge_never_preflighted_then_are_made_once_it_passes(
    agent, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    evaluator = evaluator_for(agent)
    (score,) = pending(evaluator)
    fake_llm.add_rule(task="judge", json={"score": 5, "reasoning": "Some of it is right and some is not."}, times=0)

    with django_capture_on_commit_callbacks(execute=False) as preflight_sends:
        waited = online_score_run(score_id=score.pk)

    assert (waited.status, waited.error) == ("skipped", PREFLIGHT_PENDING)
    assert len(preflight_sends) == 1  # its preflight was started, not run here
    assert fake_llm.count("judge", online_score=score.pk) == 0
    config = preflighted(fake_llm, evaluator)

    with django_capture_on_commit_callbacks(execute=True):
        assert reaper.preflight_waiting_resume() == 1

    score.refresh_from_db()
    assert (score.status, score.judge_config, score.error) == ("scored", config, "")
    assert fake_llm.count("judge", online_score=score.pk) == 1


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"placeholder": True, "json": {"score": 10}}, "placeholder"),
        ({"json": CONTRADICTING_JUDGE}, "says the opposite"),
        ({"json": {"score": 9, "reasoning": "   "}}, "no reasoning"),
    ],
    ids=["placeholder", "contradicting", "empty"],
)
def test_a_judge_answer_that_fails_its_checks_is_unusable_and_not_counted(agent, fake_llm, answer, why):
    evaluator = evaluator_for(agent)
    fake_llm.add_rule(task="judge", contains="ORDER-77", **answer)
    preflighted(fake_llm, evaluator)
    (score,) = pending(evaluator, question="What happened to ORDER-77?")

    score = online_score_run(score_id=score.pk)

    assert (score.status, score.score, score.passed) == ("unusable", None, None)
    assert score.error.startswith("Judge answer unusable") and why in score.error
    assert score.tokens > 0  # its spend is still the judge's
    assert fake_llm.count("judge", online_score=score.pk) == 2  # asked once more, as runs do


def test_an_empty_judge_reply_is_an_error_and_not_counted(agent, fake_llm):
    evaluator = evaluator_for(agent)
    fake_llm.add_rule(task="judge", contains="ORDER-78", reply="")
    preflighted(fake_llm, evaluator)
    (score,) = pending(evaluator, question="What happened to ORDER-78?")

    score = online_score_run(score_id=score.pk)

    # As in runs: no JSON at all is the judge failing (a repair round asked), not a judgment.
    assert (score.status, score.score, score.passed) == ("error", None, None)
    assert "the answer was empty" in score.error


def test_with_no_judge_model_the_score_abstains(agent, no_llm):
    evaluator = evaluator_for(agent)
    (score,) = pending(evaluator)

    score = online_score_run(score_id=score.pk)

    assert score.status == "abstained" and "Needs a judge model" in score.error


def test_a_deleted_trace_is_skipped_with_its_reason(agent, fake_llm):
    evaluator = evaluator_for(agent)
    preflighted(fake_llm, evaluator)
    (score,) = pending(evaluator)
    score.trace.delete()

    score = online_score_run(score_id=score.pk)

    assert score.status == "skipped" and "deleted" in score.error


def test_a_disabled_evaluator_scores_nothing(agent, fake_llm):
    evaluator = evaluator_for(agent, enabled=False)
    (score,) = pending(evaluator)

    assert online_score_run(score_id=score.pk).status == OnlineScore.Status.SKIPPED
    assert fake_llm.count("judge") == 0


def test_the_cost_recorded_is_what_the_judge_spent(agent, fake_llm, settings):
    settings.EVALSITE_JUDGE_MODEL = "openai/gpt-4o-mini"  # a model litellm has a price for
    evaluator = evaluator_for(agent)
    preflighted(fake_llm, evaluator)
    (score,) = pending(evaluator)

    score = online_score_run(score_id=score.pk)

    assert score.status == "scored" and score.cost > Decimal(0)


PRICED = "openai/gpt-4o"  # a model litellm has a price for, served by the fake
LONG_QUESTION = "Please check my order history and tell me what went wrong. " * 150


def _upper_estimate(score: OnlineScore) -> Decimal:
    evaluator = score.evaluator
    config = evaluator_judge_config(evaluator)
    return scoring._estimate(scoring.evaluation_for(score), scoring._judge_scoring(config), evaluator)


def test_an_evaluator_scores_within_its_daily_cost_cap(agent, fake_llm, settings):
    settings.EVALSITE_JUDGE_MODEL = PRICED
    probe = evaluator_for(agent)
    preflighted(fake_llm, probe)
    (first,) = pending(probe, question=LONG_QUESTION)
    estimate = _upper_estimate(first)
    each = online_score_run(score_id=first.pk).cost
    assert Decimal(0) < each < estimate
    cap = (estimate + each * Decimal("2.5")).quantize(Decimal("0.01"), "ROUND_UP")  # the field holds cents
    fits = int((cap - estimate) / each) + 1  # started while today's spend plus one estimate fits
    evaluator = evaluator_for(agent, daily_cost_cap=cap)

    done = [online_score_run(score_id=score.pk) for score in pending(evaluator, fits + 3, question=LONG_QUESTION)]

    assert [score.status for score in done] == ["scored"] * fits + ["skipped"] * 3
    assert {score.error for score in done[fits:]} == {scoring.CAP_REACHED}
    assert sum(score.cost for score in done) <= cap
    assert all(fake_llm.count("judge", online_score=score.pk) == 0 for score in done[fits:])  # no call made


def test_two_workers_at_once_cannot_both_spend_the_last_of_the_cap(agent, fake_llm, settings):
    settings.EVALSITE_JUDGE_MODEL = PRICED
    evaluator = evaluator_for(agent)
    preflighted(fake_llm, evaluator)
    first, second = pending(evaluator, 2, question=LONG_QUESTION)
    estimate = _upper_estimate(first)
    evaluator.daily_cost_cap = (estimate * Decimal("1.5")).quantize(Decimal("0.01"))
    assert estimate <= evaluator.daily_cost_cap < 2 * estimate
    evaluator.save(update_fields=["daily_cost_cap"])

    # Both leases taken, as two workers would, before either judge has answered.
    one, two = scoring._take(first.pk), scoring._take(second.pk)

    assert scoring._reserve(one, evaluator, estimate=estimate) is True
    assert scoring._reserve(two, evaluator, estimate=estimate) is False  # the first one's reservation counts
    assert scoring.spent_today(evaluator) == estimate
