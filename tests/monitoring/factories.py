"""Production traffic as the ingestion stores it, for tests of what reads it (pages, scoring, learning
cases). Tests of ingestion itself send real OTLP instead."""

import secrets
from datetime import timedelta

import factory
from django.utils import timezone

from monitoring.models import Conversation, Feedback, OnlineEvaluator, OnlineScore, Span, Trace
from runs.models import JudgeConfig
from tests.factories import AgentFactory


def _hex(length: int) -> str:
    return secrets.token_hex(length // 2)


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation

    agent = factory.SubFactory(AgentFactory)
    team = factory.LazyAttribute(lambda c: c.agent.team)
    session_id = factory.Sequence(lambda n: f"session-{n}")
    started_at = factory.LazyFunction(timezone.now)
    last_activity_at = factory.LazyAttribute(lambda c: c.started_at)


class TraceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Trace

    agent = factory.SubFactory(AgentFactory)
    team = factory.LazyAttribute(lambda t: t.agent.team)
    otel_trace_id = factory.LazyFunction(lambda: _hex(32))
    service_name = "support-bot"
    name = "chat gpt-4o-mini"
    started_at = factory.LazyFunction(timezone.now)
    ended_at = factory.LazyAttribute(lambda t: t.started_at + timedelta(milliseconds=t.duration_ms))
    duration_ms = 850
    model = "gpt-4o-mini"
    question = "How do I reset my password?"
    answer = "Open Settings, choose Security, then Reset password."
    messages = factory.LazyAttribute(
        lambda t: [{"role": "user", "content": t.question}, {"role": "assistant", "content": t.answer}]
    )
    input_tokens = 42
    output_tokens = 17
    span_count = 1


class SpanFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Span

    trace = factory.SubFactory(TraceFactory)
    span_id = factory.LazyFunction(lambda: _hex(16))
    name = "chat gpt-4o-mini"
    kind = "client"
    start_time_unix_nano = factory.LazyAttribute(lambda s: int(s.trace.started_at.timestamp() * 1e9))
    end_time_unix_nano = factory.LazyAttribute(lambda s: s.start_time_unix_nano + 850_000_000)
    attributes = factory.LazyFunction(lambda: {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"})


class FeedbackFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Feedback

    trace = factory.SubFactory(TraceFactory)
    team = factory.LazyAttribute(lambda f: f.trace.team)
    otel_trace_id = factory.LazyAttribute(lambda f: f.trace.otel_trace_id)
    kind = Feedback.Kind.THUMBS
    value = 0


class OnlineEvaluatorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = OnlineEvaluator

    agent = factory.SubFactory(AgentFactory)
    name = factory.Sequence(lambda n: f"Helpfulness {n}")
    sampling_rate = 1.0
    scoring = factory.LazyFunction(lambda: {"evaluation_criteria": "The answer is correct and helpful."})


class JudgeConfigFactory(factory.django.DjangoModelFactory):
    """An online judge's configuration (no dataset), numbered in sequence."""

    class Meta:
        model = JudgeConfig

    number = factory.Sequence(lambda n: n + 1)
    fingerprint = factory.LazyFunction(lambda: _hex(64))
    judge_model = "openai/judge-model"


class OnlineScoreFactory(factory.django.DjangoModelFactory):
    """A finished online score of a trace: 8/10, passed, unless told otherwise."""

    class Meta:
        model = OnlineScore

    trace = factory.SubFactory(TraceFactory)
    evaluator = factory.SubFactory(OnlineEvaluatorFactory, agent=factory.SelfAttribute("..trace.agent"))
    judge_config = factory.SubFactory(JudgeConfigFactory)
    status = OnlineScore.Status.SCORED
    score = 8.0
    passed = factory.LazyAttribute(lambda s: s.score is not None and s.score >= 7)
    verdict = factory.LazyAttribute(lambda s: "pass" if s.passed else "fail")
    reasoning = "The answer names the right steps."
    scored_at = factory.LazyFunction(timezone.now)
