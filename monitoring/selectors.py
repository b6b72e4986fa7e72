"""Reads of an agent's production traffic for the monitoring pages and the API: the trace list
(filters, search, newest first), one trace with its span tree, scores and feedback, and the
traffic figures per time bucket (volume, errors, cost, latency p50/p95).

Every read starts from an agent the caller already reached through its team
(agents.selectors.agent_get_for_user), so another team's trace is a 404.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Literal

from django.db.models import Exists, Min, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import TruncDay, TruncHour
from django.shortcuts import get_object_or_404
from django.utils import timezone

from agents.models import Agent
from monitoring.models import Feedback, LearningCase, OnlineScore, Span, Trace

Period = Literal["24h", "7d", "30d"]
Bucketing = Literal["hour", "day"]
# The period selector: how far back, and the bucket of its charts.
PERIODS: dict[str, tuple[timedelta, Bucketing]] = {
    "24h": (timedelta(hours=24), "hour"),
    "7d": (timedelta(days=7), "day"),
    "30d": (timedelta(days=30), "day"),
}
DEFAULT_PERIOD = "24h"
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
NEGATIVE_FEEDBACK = Q(kind=Feedback.Kind.THUMBS, value=0) | Q(kind=Feedback.Kind.SCORE, value__lt=5)


def period_start(period: str) -> tuple[datetime, Bucketing]:
    """(since, bucket) of a period name; an unknown name is the default period."""
    span, bucket = PERIODS.get(period, PERIODS[DEFAULT_PERIOD])
    return timezone.now() - span, bucket


# ---- the trace list ---------------------------------------------------------------------


@dataclass
class TraceFilters:
    """What the trace list is narrowed to; empty values filter nothing."""

    service: str = ""
    status: str = ""  # "ok" | "error"
    negative_feedback: bool = False
    failed: bool = False  # an online score that failed
    score_below: float | None = None  # an online score below this (0-10)
    model: str = ""
    date_from: date | None = None
    date_to: date | None = None
    q: str = ""  # the question or the answer's text, or a trace id

    @property
    def active(self) -> bool:
        return any(
            [
                self.service,
                self.status,
                self.negative_feedback,
                self.failed,
                self.score_below is not None,
                self.model,
                self.date_from,
                self.date_to,
                self.q,
            ]
        )


def _negative_feedback() -> Exists:
    return Exists(Feedback.objects.filter(NEGATIVE_FEEDBACK, trace=OuterRef("pk")))


def _scored() -> QuerySet[OnlineScore]:
    return OnlineScore.objects.filter(trace=OuterRef("pk"), status=OnlineScore.Status.SCORED)


def trace_list(*, agent: Agent, filters: TraceFilters | None = None) -> QuerySet[Trace]:
    """The agent's traces, newest first, each annotated with `negative_feedback` (bool),
    `failed_score` (bool: an online score that failed) and `lowest_score` (the lowest counted
    score, or None). One query, whatever the page holds."""
    filters = filters or TraceFilters()
    lowest = _scored().order_by().values("trace").annotate(low=Min("score")).values("low")
    traces = (
        Trace.objects.filter(agent=agent)
        .annotate(
            negative_feedback=_negative_feedback(),
            failed_score=Exists(_scored().filter(passed=False)),
            lowest_score=Subquery(lowest[:1]),
        )
        .defer("attributes", "messages", "tool_calls", "retrieval_documents")
        .order_by("-started_at", "-id")
    )
    if filters.service:
        traces = traces.filter(service_name=filters.service)
    if filters.status:
        traces = traces.filter(status=filters.status)
    if filters.model:
        traces = traces.filter(model=filters.model)
    if filters.negative_feedback:
        traces = traces.filter(negative_feedback=True)
    if filters.failed:
        traces = traces.filter(failed_score=True)
    if filters.score_below is not None:
        traces = traces.filter(Exists(_scored().filter(score__lt=filters.score_below)))
    if filters.date_from:
        traces = traces.filter(started_at__date__gte=filters.date_from)
    if filters.date_to:
        traces = traces.filter(started_at__date__lte=filters.date_to)
    if filters.q:
        query = filters.q.strip()
        if TRACE_ID.match(query.lower()):
            traces = traces.filter(otel_trace_id=query.lower())
        else:
            traces = traces.filter(Q(question__icontains=query) | Q(answer__icontains=query))
    return traces


def trace_filter_choices(*, agent: Agent) -> dict[str, list[str]]:
    """The services and models the agent's traces came with, for the filters' menus."""
    traces = Trace.objects.filter(agent=agent).order_by()
    return {
        "services": sorted(set(traces.values_list("service_name", flat=True).distinct()) - {""}),
        "models": sorted(set(traces.values_list("model", flat=True).distinct()) - {""}),
    }


# ---- one trace ----------------------------------------------------------------------------


def trace_get(*, agent: Agent, trace_pk: int) -> Trace:
    """The agent's trace with its spans, online scores (with evaluator and judge configuration),
    its conversation's scores, feedback and learning cases; 404 for another agent's. A fixed number of queries."""
    traces = (
        Trace.objects.filter(agent=agent)
        .select_related("conversation")
        .prefetch_related(
            Prefetch("spans", queryset=Span.objects.order_by("start_time_unix_nano", "id")),
            Prefetch("scores", queryset=OnlineScore.objects.select_related("evaluator", "judge_config")),
            # A whole-conversation evaluator's scores hang on the conversation, not on one trace.
            Prefetch("conversation__scores", queryset=OnlineScore.objects.select_related("evaluator", "judge_config")),
            "feedback",
            Prefetch("learning_cases", queryset=LearningCase.objects.select_related("dataset")),
        )
    )
    return get_object_or_404(traces, pk=trace_pk)


@dataclass
class SpanRow:
    span: Span
    depth: int
    offset: float  # % of the trace's time before the span started
    width: float  # % of the trace's time the span took (at least a sliver)


def span_tree(spans: list[Span]) -> list[SpanRow]:
    """The spans in tree order (each after its parent, children by start time), with their depth
    and timing bar. A span whose parent never arrived is shown as a root."""
    if not spans:
        return []
    start = min(span.start_time_unix_nano for span in spans)
    end = max(span.end_time_unix_nano for span in spans)
    total = max(1, end - start)
    ids = {span.span_id for span in spans}
    children: dict[str, list[Span]] = {}
    roots: list[Span] = []
    for span in spans:
        if span.parent_span_id and span.parent_span_id in ids and span.parent_span_id != span.span_id:
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append(span)
    rows: list[SpanRow] = []
    seen: set[str] = set()
    stack = [(span, 0) for span in reversed(roots)]
    while stack:
        span, depth = stack.pop()
        if span.span_id in seen:  # a loop of parents: show each span once
            continue
        seen.add(span.span_id)
        offset = (span.start_time_unix_nano - start) / total * 100
        width = max(0.5, (span.end_time_unix_nano - span.start_time_unix_nano) / total * 100)
        rows.append(SpanRow(span, depth, round(offset, 2), round(min(width, 100 - offset), 2)))
        stack += [(child, depth + 1) for child in reversed(children.get(span.span_id, []))]
    rows += [SpanRow(span, 0, 0, 100) for span in spans if span.span_id not in seen]
    return rows


# ---- traffic figures -----------------------------------------------------------------------


@dataclass
class TrafficBucket:
    start: datetime
    count: int = 0
    errors: int = 0
    cost: Decimal = Decimal(0)
    durations: list[int] = field(default_factory=list, repr=False)

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.count if self.count else None

    @property
    def p50(self) -> int | None:
        return percentile(self.durations, 50)

    @property
    def p95(self) -> int | None:
        return percentile(self.durations, 95)


@dataclass
class Traffic:
    buckets: list[TrafficBucket]
    total: TrafficBucket


def percentile(values: list[int], pct: int) -> int | None:
    """The nearest-rank percentile of sorted `values`, None when empty."""
    if not values:
        return None
    rank = max(1, -(-pct * len(values) // 100))  # ceil
    return values[rank - 1]


def traffic_series(*, agent: Agent, starts: list[datetime], bucket: str) -> Traffic:
    """Volume, errors, cost and latency of the agent's traces in each bucket starting at `starts`
    (the online score series' buckets, so both charts share their x axis). One query."""
    trunc = TruncHour if bucket == "hour" else TruncDay
    buckets = {start: TrafficBucket(start) for start in starts}
    total = TrafficBucket(starts[0] if starts else timezone.now())
    rows = (
        Trace.objects.filter(agent=agent, started_at__gte=starts[0] if starts else timezone.now())
        .annotate(bucket=trunc("started_at"))
        .order_by("duration_ms")
        .values_list("bucket", "duration_ms", "status", "cost")
    )
    for start, duration, status, cost in rows:
        for target in (buckets.get(start), total):
            if target is None:
                continue
            target.count += 1
            target.errors += status == Trace.Status.ERROR
            target.cost += cost
            target.durations.append(duration)
    return Traffic(buckets=[buckets[start] for start in starts], total=total)
