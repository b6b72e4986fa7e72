"""Which traces an online evaluator takes (issue 47, point 3): the ingestion hook only sends a job;
the job applies filters and a deterministic sample and claims one pending score per trace."""

from datetime import timedelta

import pytest
from django.utils import timezone

from monitoring.models import OnlineEvaluator, OnlineScore, Trace
from monitoring.online import traces_ingested
from monitoring.online.filters import filters_clean
from monitoring.online.sampling import sampled
from monitoring.online.selection import online_conversations_select, online_traces_select, online_traces_sweep
from tests.broker import waiting
from tests.monitoring.factories import ConversationFactory, FeedbackFactory, OnlineEvaluatorFactory, TraceFactory

pytestmark = pytest.mark.django_db


def test_the_hook_only_sends_the_selection_job(agent, broker_queue, django_capture_on_commit_callbacks):
    OnlineEvaluatorFactory(agent=agent)
    traces = TraceFactory.create_batch(3, agent=agent)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        traces_ingested([trace.pk for trace in traces])

    assert len(callbacks) == 1
    assert waiting(broker_queue) == 1  # one message for the batch, nothing judged in the request
    assert not OnlineScore.objects.exists()


def test_the_hook_sends_nothing_when_no_evaluator_is_enabled(agent, broker_queue, django_capture_on_commit_callbacks):
    OnlineEvaluatorFactory(agent=agent, enabled=False)
    trace = TraceFactory(agent=agent)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        traces_ingested([trace.pk])

    assert callbacks == [] and waiting(broker_queue) == 0


def test_the_job_claims_one_pending_score_per_trace_and_sends_it(
    agent, broker_queue, django_capture_on_commit_callbacks
):
    evaluator = OnlineEvaluatorFactory(agent=agent)
    traces = TraceFactory.create_batch(4, agent=agent)
    ids = [trace.pk for trace in traces]

    with django_capture_on_commit_callbacks(execute=True):
        assert online_traces_select(trace_ids=ids) == 4
    with django_capture_on_commit_callbacks(execute=True):
        assert online_traces_select(trace_ids=ids) == 4  # delivered twice: the same claims, sent again

    scores = OnlineScore.objects.filter(evaluator=evaluator)
    assert scores.count() == 4 and set(scores.values_list("status", flat=True)) == {"pending"}
    assert waiting(broker_queue) == 8  # the copies are harmless: a score is taken by one lease only


def test_a_sample_is_taken_at_its_rate_and_decided_the_same_every_time(agent):
    evaluator = OnlineEvaluatorFactory(agent=agent, sampling_rate=0.25)
    traces = TraceFactory.create_batch(400, agent=agent)

    online_traces_select(trace_ids=[trace.pk for trace in traces])

    taken = OnlineScore.objects.filter(evaluator=evaluator).count()
    assert 70 <= taken <= 130  # 100 expected; the hash is fixed, so this never flakes
    expected = {trace.pk for trace in traces if sampled(evaluator.pk, trace.otel_trace_id, 0.25)}
    assert set(OnlineScore.objects.values_list("trace_id", flat=True)) == expected


def test_rates_zero_and_one_take_none_and_all(agent):
    none = OnlineEvaluatorFactory(agent=agent, sampling_rate=0)
    every = OnlineEvaluatorFactory(agent=agent, sampling_rate=1)
    traces = TraceFactory.create_batch(20, agent=agent)

    online_traces_select(trace_ids=[trace.pk for trace in traces])

    assert OnlineScore.objects.filter(evaluator=none).count() == 0
    assert OnlineScore.objects.filter(evaluator=every).count() == 20


@pytest.mark.parametrize(
    ("filters", "kept"),
    [
        ({"service": "billing"}, {"billing"}),
        ({"errors_only": True}, {"error"}),
        ({"latency_over_ms": 2000}, {"slow"}),
        ({"tags": ["vip"]}, {"vip"}),
        ({"attributes": [{"key": "deployment.environment", "op": "equals", "value": "prod"}]}, {"prod"}),
        ({"attributes": [{"key": "gen_ai.request.model", "op": "contains", "value": "mini"}]}, {"mini"}),
        ({"feedback": "negative"}, {"thumbs-down"}),
        ({"feedback": "positive"}, {"thumbs-up"}),
        ({"feedback": "any"}, {"thumbs-down", "thumbs-up"}),
    ],
)
def test_filters_pick_the_traces_they_describe(agent, filters, kept):
    evaluator = OnlineEvaluatorFactory(agent=agent, filters=filters_clean(filters))
    made = {
        "plain": TraceFactory(agent=agent),
        "billing": TraceFactory(agent=agent, service_name="billing"),
        "error": TraceFactory(agent=agent, status=Trace.Status.ERROR, error="Timeout", answer=""),
        "slow": TraceFactory(agent=agent, duration_ms=4500),
        "vip": TraceFactory(agent=agent, tags=["vip", "eu"]),
        "prod": TraceFactory(agent=agent, attributes={"deployment.environment": "prod"}),
        "mini": TraceFactory(agent=agent, attributes={"gen_ai.request.model": "gpt-4o-mini"}),
        "thumbs-down": TraceFactory(agent=agent),
        "thumbs-up": TraceFactory(agent=agent),
    }
    FeedbackFactory(trace=made["thumbs-down"], value=0)
    FeedbackFactory(trace=made["thumbs-up"], value=1)

    online_traces_select(trace_ids=[trace.pk for trace in made.values()])

    taken = set(OnlineScore.objects.filter(evaluator=evaluator).values_list("trace_id", flat=True))
    assert taken == {made[name].pk for name in kept}


def test_bad_filters_say_what_is_wrong():
    with pytest.raises(Exception, match="Unknown filter colour"):
        filters_clean({"colour": "red"})
    with pytest.raises(Exception, match="latency_over_ms must be a whole number"):
        filters_clean({"latency_over_ms": "fast"})
    with pytest.raises(Exception, match="Attribute filter 1 needs a key"):
        filters_clean({"attributes": [{"value": "x"}]})


def test_a_trace_not_answered_yet_waits(agent):
    OnlineEvaluatorFactory(agent=agent)
    trace = TraceFactory(agent=agent, answer="")

    assert online_traces_select(trace_ids=[trace.pk]) == 0


def test_another_agents_evaluator_takes_nothing(agent):
    OnlineEvaluatorFactory()  # another agent's
    trace = TraceFactory(agent=agent)

    assert online_traces_select(trace_ids=[trace.pk]) == 0


def test_the_beat_sweep_takes_what_a_lost_hook_message_missed(agent):
    evaluator = OnlineEvaluatorFactory(agent=agent)
    OnlineEvaluator.objects.filter(pk=evaluator.pk).update(created_at=timezone.now() - timedelta(hours=1))
    traces = TraceFactory.create_batch(3, agent=agent)
    later = timezone.now() + timedelta(minutes=5)

    assert online_traces_sweep(now=later) == 3
    assert online_traces_sweep(now=later) == 0  # swept_until moved on
    assert OnlineScore.objects.filter(evaluator=evaluator).count() == len(traces)


def test_a_conversation_is_scored_as_a_whole_once_idle(agent):
    evaluator = OnlineEvaluatorFactory(agent=agent, scope=OnlineEvaluator.Scope.CONVERSATION, idle_minutes=30)
    OnlineEvaluator.objects.filter(pk=evaluator.pk).update(created_at=timezone.now() - timedelta(days=1))
    now = timezone.now()
    idle = ConversationFactory(agent=agent, last_activity_at=now - timedelta(minutes=45))
    busy = ConversationFactory(agent=agent, last_activity_at=now - timedelta(minutes=5))
    for conversation in (idle, busy):
        TraceFactory.create_batch(2, agent=agent, conversation=conversation)

    assert online_traces_select(trace_ids=list(Trace.objects.values_list("pk", flat=True))) == 0  # not per trace
    assert online_conversations_select(now=now) == 1
    assert online_conversations_select(now=now) == 0

    score = OnlineScore.objects.get(evaluator=evaluator)
    assert score.conversation == idle and score.trace is None
