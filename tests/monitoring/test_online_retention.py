"""Retention (issue 47, point 5): traces older than the team's retention_days are deleted by the
beat job in batches; learning cases made from them keep their text, scores keep their numbers."""

from datetime import timedelta

import pytest
from django.utils import timezone

from monitoring.models import Conversation, Feedback, LearningCase, OnlineScore, Span, TeamMonitoring, Trace
from monitoring.online import retention
from monitoring.online.scoring import evaluator_judge_config
from monitoring.online.series import online_score_series
from tests.monitoring.factories import ConversationFactory, FeedbackFactory, SpanFactory, TraceFactory
from tests.monitoring.online_helpers import evaluator_for

pytestmark = pytest.mark.django_db


def _old(days: int, **fields) -> Trace:
    return TraceFactory(started_at=timezone.now() - timedelta(days=days), **fields)


def test_traces_past_the_teams_retention_go_with_their_spans_and_feedback(agent):
    TeamMonitoring.objects.create(team=agent.team, retention_days=7)
    old, kept = _old(8, agent=agent), _old(6, agent=agent)
    SpanFactory.create_batch(3, trace=old)
    FeedbackFactory(trace=old)

    assert retention.traces_retention() == 1

    assert list(Trace.objects.all()) == [kept]
    assert not Span.objects.filter(trace_id=old.pk).exists() and not Feedback.objects.exists()


def test_a_team_without_settings_keeps_traces_30_days(agent):
    old, kept = _old(31, agent=agent), _old(29, agent=agent)

    retention.traces_retention()

    assert list(Trace.objects.all()) == [kept] and old.pk


def test_each_team_has_its_own_retention(agent, other_team):
    TeamMonitoring.objects.create(team=agent.team, retention_days=1)
    ours = _old(2, agent=agent)
    theirs = _old(2, agent=None, team=other_team)

    retention.traces_retention()

    assert not Trace.objects.filter(pk=ours.pk).exists() and Trace.objects.filter(pk=theirs.pk).exists()


def test_it_deletes_in_batches_until_done(agent, monkeypatch):
    monkeypatch.setattr(retention, "BATCH", 2)
    for _ in range(5):
        _old(40, agent=agent)

    assert retention.traces_retention() == 5 and not Trace.objects.exists()


def test_learning_cases_keep_their_text_and_scores_their_numbers(agent, fake_llm):
    trace = _old(40, agent=agent, question="Can I return shoes?", answer="No.")
    case = LearningCase.objects.create(
        agent=agent,
        trace=trace,
        otel_trace_id=trace.otel_trace_id,
        trace_time=trace.started_at,
        service_name=trace.service_name,
        reason=LearningCase.Reason.LOW_SCORE,
        question=trace.question,
        actual_answer=trace.answer,
        expected_answer="Yes, within 30 days.",
    )
    evaluator = evaluator_for(agent)
    config = evaluator_judge_config(evaluator)
    score = OnlineScore.objects.create(
        evaluator=evaluator, judge_config=config, trace=trace, status="scored", score=2, passed=False,
        reasoning="Says no to: Can I return shoes?", scored_at=timezone.now() - timedelta(hours=1),
    )  # fmt: skip

    retention.traces_retention()

    case.refresh_from_db()
    score.refresh_from_db()
    assert case.trace is None and (case.question, case.actual_answer) == ("Can I return shoes?", "No.")
    assert case.otel_trace_id == trace.otel_trace_id
    assert score.trace is None and (score.score, score.passed, score.judge_config) == (2, False, config)
    assert score.reasoning == ""  # it quoted the deleted trace
    series = online_score_series(agent=agent, since=timezone.now() - timedelta(days=1), bucket="day")
    assert [(line.scored, line.passed) for line in series.lines] == [(1, 0)]


def test_an_emptied_old_conversation_goes_too(agent):
    TeamMonitoring.objects.create(team=agent.team, retention_days=7)
    long_ago = timezone.now() - timedelta(days=9)
    conversation = ConversationFactory(agent=agent, started_at=long_ago, last_activity_at=long_ago)
    _old(9, agent=agent, conversation=conversation)

    retention.traces_retention()

    assert not Conversation.objects.exists()
