"""The online score series (issue 47, point 4): score and pass rate over time, one line per
evaluator and judge configuration (two judges never pooled), what was not counted named beside."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from monitoring.models import OnlineScore
from monitoring.online.scoring import evaluator_judge_config
from monitoring.online.series import online_score_series
from runs.judging.configs import judge_config_for
from tests.monitoring.factories import TraceFactory
from tests.monitoring.online_helpers import evaluator_for

pytestmark = pytest.mark.django_db


def _score(evaluator, config, *, hours_ago: float, status="scored", passed=None, score=None, cost="0.001"):
    return OnlineScore.objects.create(
        evaluator=evaluator,
        judge_config=config,
        trace=TraceFactory(agent=evaluator.agent),
        status=status,
        passed=passed,
        score=score,
        cost=Decimal(cost),
        scored_at=None if status == "pending" else timezone.now() - timedelta(hours=hours_ago),
    )


def test_each_judge_configuration_has_its_own_line(agent, fake_llm):
    evaluator = evaluator_for(agent)
    first = evaluator_judge_config(evaluator)
    second = judge_config_for(dataset=None, scoring={**evaluator.scoring, "pass_threshold": 9})
    _score(evaluator, first, hours_ago=5, passed=True, score=8)
    _score(evaluator, first, hours_ago=5, passed=False, score=4)
    _score(evaluator, second, hours_ago=1, passed=False, score=8)

    series = online_score_series(agent=agent, since=timezone.now() - timedelta(hours=24))

    assert [(line.judge_config, line.scored, line.passed, line.mean_score) for line in series.lines] == [
        (first, 2, 1, 6.0),
        (second, 1, 0, 8.0),
    ]
    assert series.lines[0].pass_rate == 0.5 and series.lines[1].pass_rate == 0
    assert series.lines[0].label == f"{evaluator.name} · {first.label}"


def test_every_bucket_is_there_and_lines_share_the_axis(agent, fake_llm):
    evaluator = evaluator_for(agent)
    config = evaluator_judge_config(evaluator)
    _score(evaluator, config, hours_ago=3, passed=True, score=9)

    series = online_score_series(agent=agent, since=timezone.now() - timedelta(hours=6))

    (line,) = series.lines
    assert len(line.buckets) == len(series.bucket_starts) in (6, 7)
    filled = [bucket for bucket in line.buckets if bucket.scored]
    assert len(filled) == 1 and filled[0].pass_rate == 1 and filled[0].cost == Decimal("0.001")
    assert all(bucket.pass_rate is None for bucket in line.buckets if not bucket.scored)


def test_scores_that_are_not_a_pass_or_a_fail_are_counted_beside(agent, fake_llm):
    evaluator = evaluator_for(agent)
    config = evaluator_judge_config(evaluator)
    _score(evaluator, config, hours_ago=1, passed=True, score=9)
    _score(evaluator, config, hours_ago=1, status="unusable")
    _score(evaluator, config, hours_ago=1, status="skipped")
    _score(evaluator, None, hours_ago=1, status="abstained")
    _score(evaluator, config, hours_ago=0, status="pending")

    series = online_score_series(agent=agent, since=timezone.now() - timedelta(hours=3))

    (line,) = series.lines
    assert (line.scored, line.passed, line.pass_rate) == (1, 1, 1.0)
    assert line.not_counted == {"unusable": 1, "skipped": 1}
    assert series.not_counted == {"unusable": 1, "skipped": 1, "abstained": 1}
    assert series.pending == 1


def test_days_and_one_evaluator(agent, fake_llm):
    ours, other = evaluator_for(agent), evaluator_for(agent)
    config = evaluator_judge_config(ours)
    _score(ours, config, hours_ago=30, passed=True, score=9)
    _score(other, config, hours_ago=30, passed=False, score=1)

    series = online_score_series(agent=agent, since=timezone.now() - timedelta(days=3), bucket="day", evaluator=ours)

    assert [(line.evaluator, line.scored) for line in series.lines] == [(ours, 1)]
    with pytest.raises(ValueError):
        online_score_series(agent=agent, since=timezone.now(), bucket="week")


def test_another_agents_scores_are_not_in_it(agent, fake_llm):
    evaluator = evaluator_for(agent)
    stranger = evaluator_for(TraceFactory().agent)
    _score(stranger, evaluator_judge_config(stranger), hours_ago=1, passed=True, score=9)

    assert online_score_series(agent=agent, since=timezone.now() - timedelta(hours=3)).lines == []
    assert evaluator.pk
