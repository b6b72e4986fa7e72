"""The monitoring pages of one agent: the overview (online scores per judge configuration, volume,
cost, latency, errors, open alerts), the trace list (filters, search, polled), a trace, and the
learning cases (queue, review, approve into a dataset, reject)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from agents.models import Agent
from agents.selectors import agent_get_for_user
from evalsite import paging
from evalsite.http import AuthedRequest, is_partial
from monitoring import charts, learning, selectors
from monitoring.models import Alert, LearningCase, OnlineScore
from monitoring.online.series import online_score_series
from monitoring.page_forms import LearningApproveForm, LearningCreateForm, LearningRejectForm, TraceFilterForm

TRACES_PER_PAGE = 50
LEARNING_PER_PAGE = 50


def _get_agent_for_user(request: AuthedRequest, agent_id: int) -> Agent:
    return agent_get_for_user(user=request.user, agent_id=agent_id)


def _get_case_for_user(request: AuthedRequest, agent_id: int, learning_case_id: int) -> LearningCase:
    agent = _get_agent_for_user(request, agent_id)
    # The trace's scores and feedback: why the case is doubtful, beside the answer under review.
    scores = OnlineScore.objects.select_related("evaluator", "judge_config")
    cases = LearningCase.objects.select_related(
        "agent", "dataset", "test_case", "trace", "reviewed_by"
    ).prefetch_related(Prefetch("trace__scores", queryset=scores), "trace__feedback")
    return get_object_or_404(cases, pk=learning_case_id, agent=agent)


def _refused(request: AuthedRequest, error: ValidationError, fallback: str) -> HttpResponse:
    messages.error(request, " ".join(error.messages))
    return redirect(fallback)


@login_required
@require_GET
def monitoring_page(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    period = request.GET.get("period", selectors.DEFAULT_PERIOD)
    period = period if period in selectors.PERIODS else selectors.DEFAULT_PERIOD
    since, bucket = selectors.period_start(period)
    series = online_score_series(agent=agent, since=since, bucket=bucket)
    traffic = selectors.traffic_series(agent=agent, starts=series.bucket_starts, bucket=bucket)
    alerts = Alert.objects.filter(evaluator__agent=agent, resolved_at__isnull=True).select_related(
        "evaluator", "judge_config"
    )
    context = {
        "agent": agent,
        "period": period,
        "periods": list(selectors.PERIODS),
        "series": series,
        "traffic": traffic,
        "pass_chart": charts.pass_rate_chart(series),
        "score_chart": charts.mean_score_chart(series),
        "volume_chart": charts.volume_chart(traffic, bucket),
        "latency_chart": charts.latency_chart(traffic, bucket),
        "alerts": list(alerts),
        "candidates": learning.learning_case_list(agent=agent).count(),
    }
    return render(request, "monitoring/monitoring_page.html", context)


@login_required
@require_GET
def trace_list(request: AuthedRequest, agent_id: int) -> HttpResponse:
    """The traces, newest first; its htmx variant is the list region alone, which page 1 polls
    every 3 s (later pages hold still: new traces would shift them)."""
    agent = _get_agent_for_user(request, agent_id)
    form = TraceFilterForm(request.GET)
    filters = form.filters()
    page = paging.page_number(request.GET.get("page"))
    offset = (page - 1) * TRACES_PER_PAGE
    traces = list(selectors.trace_list(agent=agent, filters=filters)[offset : offset + TRACES_PER_PAGE + 1])
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "agent": agent,
        "form": form,
        "filters": filters,
        "traces": traces[:TRACES_PER_PAGE],
        "page": page,
        "has_more": len(traces) > TRACES_PER_PAGE,
        "query": query.urlencode(),
        "poll": page == 1,
        "choices": selectors.trace_filter_choices(agent=agent) if not is_partial(request) else {},
    }
    template = "monitoring/trace_list.html#region" if is_partial(request) else "monitoring/trace_list.html"
    return render(request, template, context)


@login_required
@require_GET
def trace_detail(request: AuthedRequest, agent_id: int, trace_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    trace = selectors.trace_get(agent=agent, trace_pk=trace_id)
    spans = list(trace.spans.all())
    context = {
        "agent": agent,
        "trace": trace,
        "span_rows": selectors.span_tree(spans),
        "scores": list(trace.scores.all()),
        "conversation_scores": list(trace.conversation.scores.all()) if trace.conversation else [],
        "feedback": list(trace.feedback.all()),
        "open_case": next((c for c in trace.learning_cases.all() if c.status == LearningCase.Status.CANDIDATE), None),
        "cases": list(trace.learning_cases.all()),
        "create_form": LearningCreateForm(),
    }
    return render(request, "monitoring/trace_detail.html", context)


@login_required
@require_POST
def learning_case_create(request: AuthedRequest, agent_id: int, trace_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    trace = selectors.trace_get(agent=agent, trace_pk=trace_id)
    form = LearningCreateForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else LearningCase.Reason.PICKED
    try:
        case = learning.learning_case_create(trace=trace, reason=reason, user=request.user)
    except ValidationError as error:
        return _refused(request, error, reverse("monitoring:trace", args=[agent.pk, trace.pk]))
    return redirect("monitoring:learning_case", agent.pk, case.pk)


@login_required
@require_GET
def learning_queue(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    status = request.GET.get("status", LearningCase.Status.CANDIDATE)
    status = status if status in LearningCase.Status.values else LearningCase.Status.CANDIDATE
    page = paging.page_number(request.GET.get("page"))
    offset = (page - 1) * LEARNING_PER_PAGE
    cases = list(learning.learning_case_list(agent=agent, status=status)[offset : offset + LEARNING_PER_PAGE + 1])
    context = {
        "agent": agent,
        "status": status,
        "statuses": LearningCase.Status.choices,
        "cases": cases[:LEARNING_PER_PAGE],
        "page": page,
        "has_more": len(cases) > LEARNING_PER_PAGE,
        "status_query": urlencode({"status": status}),
        "suggestions": learning.learning_suggestions(agent=agent) if status == LearningCase.Status.CANDIDATE else [],
    }
    return render(request, "monitoring/learning_queue.html", context)


@login_required
@require_GET
def learning_case_detail(request: AuthedRequest, agent_id: int, learning_case_id: int) -> HttpResponse:
    case = _get_case_for_user(request, agent_id, learning_case_id)
    approve = LearningApproveForm(agent=case.agent, initial={"expected_answer": case.expected_answer})
    return render(request, "monitoring/learning_case.html", _case_context(case, approve, LearningRejectForm()))


def _case_context(case: LearningCase, approve: LearningApproveForm, reject: LearningRejectForm) -> dict:
    return {"agent": case.agent, "case": case, "approve_form": approve, "reject_form": reject}


@login_required
@require_POST
def learning_case_approve(request: AuthedRequest, agent_id: int, learning_case_id: int) -> HttpResponse:
    case = _get_case_for_user(request, agent_id, learning_case_id)
    form = LearningApproveForm(request.POST, agent=case.agent)
    if not form.is_valid():
        context = _case_context(case, form, LearningRejectForm())
        return render(request, "monitoring/learning_case.html", context, status=422)
    try:
        test_case = learning.learning_case_approve(
            case=case,
            dataset=form.cleaned_data["dataset"],
            expected_answer=form.cleaned_data["expected_answer"],
            user=request.user,
        )
    except ValidationError as error:
        return _refused(request, error, reverse("monitoring:learning_case", args=[case.agent_id, case.pk]))
    messages.success(request, f"Added to {test_case.dataset.name} as case {test_case.position + 1}.")
    return redirect("monitoring:learning_case", case.agent_id, case.pk)


@login_required
@require_POST
def learning_case_reject(request: AuthedRequest, agent_id: int, learning_case_id: int) -> HttpResponse:
    case = _get_case_for_user(request, agent_id, learning_case_id)
    form = LearningRejectForm(request.POST)
    if not form.is_valid():
        context = _case_context(case, LearningApproveForm(agent=case.agent), form)
        return render(request, "monitoring/learning_case.html", context, status=422)
    try:
        learning.learning_case_reject(case=case, reason=form.cleaned_data["reason"], user=request.user)
    except ValidationError as error:
        return _refused(request, error, reverse("monitoring:learning_case", args=[case.agent_id, case.pk]))
    messages.success(request, "Rejected: the reason is kept with the case.")
    return redirect("monitoring:learning", case.agent_id)
