"""Review pages: the review queue of a run and of an agent, the agreement figures, and the
two posts a result card makes (review, correct the case)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from agents.models import Agent
from agents.selectors import agent_get_for_user
from evalsite.forms import form_messages
from evalsite.http import AuthedRequest
from reviews import charts, queue, selectors, services
from reviews.forms import AgreementFilterForm, CaseCorrectionForm, QueueFilterForm, ReviewForm
from runs.models import Result, Run
from runs.selectors import run_get

QUEUE_PAGE = 50


def _get_run_for_user(request: AuthedRequest, agent_id: int, run_id: int) -> tuple[Agent, Run]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    return agent, run_get(agent=agent, run_id=run_id)


def _get_result_for_user(request: AuthedRequest, agent_id: int, run_id: int, result_id: int) -> tuple[Agent, Result]:
    agent, run = _get_run_for_user(request, agent_id, run_id)
    queryset = Result.objects.select_related("case", "run").prefetch_related(selectors.reviews_prefetch())
    return agent, get_object_or_404(queryset, pk=result_id, run=run)


def _queue_page(request: AuthedRequest, agent: Agent, runs: list[Run], seed: int, run: Run | None) -> HttpResponse:
    form = QueueFilterForm(request.GET)
    filters = form.filters()
    everything = queue.review_queue(runs=runs, reviewer=request.user, seed=seed)
    items = queue.review_queue(runs=runs, reviewer=request.user, seed=seed, **filters)
    context = {
        "agent": agent,
        "run": run,
        "items": items[:QUEUE_PAGE],
        "total": len(items),
        "reasons": [(name, label, sum(name in i.reasons for i in everything)) for name, label in queue.REASONS.items()],
        "tags": queue.queue_tags(everything),
        "filters": filters,
        "here": request.get_full_path(),
    }
    return render(request, "reviews/queue.html", context)


@login_required
@require_GET
def run_queue(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    agent, run = _get_run_for_user(request, agent_id, run_id)
    return _queue_page(request, agent, [run], seed=run.pk, run=run)


@login_required
@require_GET
def agent_panel(request: AuthedRequest, agent_id: int) -> HttpResponse:
    """The agent page's judge agreement panel: the agent page loads it after the page (agents
    sits below reviews, so its view cannot read reviews' figures)."""
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    runs = selectors.agent_agreement_runs(agent=agent)
    groups = selectors.agreement_groups(runs=runs)
    context = {
        "agent": agent,
        "group": groups[0] if groups else None,
        "configurations": len(groups),
        "chart": charts.agreement_chart(selectors.agreement_over_time(runs=runs)),
    }
    return render(request, "reviews/partials/agent_panel.html", context)


@login_required
@require_GET
def run_figures(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """The run's reviewed figures beside the judge's: the run page loads them after the page
    (its query budget stays the cards'), and again after each review saved on it."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    context = {"agent": agent, "run": run, "figures": selectors.run_review_figures(run=run)}
    return render(request, "reviews/partials/run_figures.html", context)


@login_required
@require_GET
def agent_queue(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    runs = selectors.agent_queue_runs(agent=agent)
    return _queue_page(request, agent, runs, seed=agent.pk, run=None)


@login_required
@require_GET
def agreement(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    form = AgreementFilterForm(request.GET)
    tag = form.cleaned_data["tag"] if form.is_valid() else ""
    runs = selectors.agent_agreement_runs(agent=agent)
    points = selectors.agreement_over_time(runs=runs)
    context = {
        "agent": agent,
        "groups": selectors.agreement_groups(runs=runs, tag=tag),
        "tag": tag,
        "chart": charts.agreement_chart(points),
    }
    return render(request, "reviews/agreement.html", context)


@login_required
@require_POST
def review(request: AuthedRequest, agent_id: int, run_id: int, result_id: int) -> HttpResponse:
    agent, result = _get_result_for_user(request, agent_id, run_id, result_id)
    form = ReviewForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError(form_messages(form))
        services.review_save(result=result, reviewer=request.user, **form.review_fields())
    except ValidationError as error:
        return _refused(request, agent, result, " ".join(error.messages))
    if request.htmx:
        # The run page's figures listen for it and reload.
        return trigger_client_event(_control(request, agent, result_id, run_id), "reviewed", {})
    messages.success(request, "Review saved.")
    return redirect(_next(request, agent, result))


@login_required
@require_POST
def case_correct(request: AuthedRequest, agent_id: int, run_id: int, result_id: int) -> HttpResponse:
    agent, result = _get_result_for_user(request, agent_id, run_id, result_id)
    form = CaseCorrectionForm(request.POST)
    form.is_valid()  # every field is optional text
    try:
        services.case_correct(result=result, user=request.user, **form.cleaned_data)
    except ValidationError as error:
        return _refused(request, agent, result, " ".join(error.messages))
    if request.htmx:
        response = _control(request, agent, result_id, run_id)
        message = "The dataset's case is updated. This run keeps its copy."
        return trigger_client_event(response, "toast", {"message": message})
    messages.success(request, "The dataset's case is updated. This run keeps its copy.")
    return redirect(_next(request, agent, result))


def _control(request: AuthedRequest, agent: Agent, result_id: int, run_id: int) -> HttpResponse:
    """The card's review control, read again (the reviews and the case just changed)."""
    result = get_object_or_404(
        Result.objects.select_related("case__source_case", "run").prefetch_related(selectors.reviews_prefetch()),
        pk=result_id,
        run_id=run_id,
    )
    context = {
        "agent": agent,
        "run": result.run,
        "result": result,
        "case": result.case,
        "next": request.POST.get("next", ""),
    }
    return render(request, "reviews/partials/card_review.html", context)


def _refused(request: AuthedRequest, agent: Agent, result: Result, message: str) -> HttpResponse:
    if request.htmx:
        return trigger_client_event(HttpResponse(status=422), "toast", {"message": message, "level": "error"})
    messages.error(request, message)
    return redirect(_next(request, agent, result))


def _next(request: AuthedRequest, agent: Agent, result: Result) -> str:
    """Back where the reviewer was: the queue (whose next item is now on top) or the card."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    query = urlencode({"filter": "all"})
    return f"{reverse('runs:detail', args=[agent.pk, result.run_id])}?{query}#case-{result.case.position}"
