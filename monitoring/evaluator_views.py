"""The online evaluators' pages of one agent: the list, a new one, one evaluator (its settings
form, its judge's preflight state, today's spend, its latest scores and alerts), enable or
disable, delete. Writes go through monitoring.online.services, as the API's do."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from agents.models import Agent
from agents.selectors import agent_get_for_user
from datasets.view_helpers import add_service_errors
from evalsite.http import AuthedRequest
from monitoring.evaluator_forms import OnlineEvaluatorForm
from monitoring.models import OnlineEvaluator
from monitoring.online import services
from monitoring.online.scoring import NEEDS_JUDGE
from monitoring.online.selectors import evaluator_overview, evaluator_rows

RECENT_SCORES = 20


def _get_agent_for_user(request: AuthedRequest, agent_id: int) -> Agent:
    return agent_get_for_user(user=request.user, agent_id=agent_id)


def _get_evaluator_for_user(request: AuthedRequest, agent_id: int, evaluator_id: int) -> OnlineEvaluator:
    agent = _get_agent_for_user(request, agent_id)
    return get_object_or_404(OnlineEvaluator.objects.select_related("agent"), pk=evaluator_id, agent=agent)


@login_required
@require_GET
def evaluator_list(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    context = {"agent": agent, "rows": evaluator_rows(agent=agent)}
    return render(request, "monitoring/evaluators/evaluator_list.html", context)


@login_required
@require_GET
def evaluator_new(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    form = OnlineEvaluatorForm()
    return render(request, "monitoring/evaluators/evaluator_new.html", {"agent": agent, "form": form})


@login_required
@require_POST
def evaluator_create(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    form = OnlineEvaluatorForm(request.POST)
    if form.is_valid():
        try:
            evaluator = services.online_evaluator_create(agent=agent, user=request.user, settings=form.settings())
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Online evaluator “{evaluator.name}” created.")
            return redirect("monitoring:evaluator", agent.pk, evaluator.pk)
    return render(request, "monitoring/evaluators/evaluator_new.html", {"agent": agent, "form": form}, status=422)


@login_required
@require_GET
def evaluator_detail(request: AuthedRequest, agent_id: int, evaluator_id: int) -> HttpResponse:
    evaluator = _get_evaluator_for_user(request, agent_id, evaluator_id)
    return _detail(request, evaluator, OnlineEvaluatorForm.for_evaluator(evaluator))


def _detail(request: AuthedRequest, evaluator: OnlineEvaluator, form: OnlineEvaluatorForm, status: int = 200):
    context = {
        "agent": evaluator.agent, "evaluator": evaluator, "form": form, "needs_judge": NEEDS_JUDGE,
        **evaluator_overview(evaluator),
    }  # fmt: skip
    return render(request, "monitoring/evaluators/evaluator_detail.html", context, status=status)


@login_required
@require_POST
def evaluator_update(request: AuthedRequest, agent_id: int, evaluator_id: int) -> HttpResponse:
    evaluator = _get_evaluator_for_user(request, agent_id, evaluator_id)
    form = OnlineEvaluatorForm.for_evaluator(evaluator, request.POST)
    if form.is_valid():
        try:
            services.online_evaluator_update(evaluator=evaluator, user=request.user, settings=form.settings())
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, "Online evaluator saved.")
            return redirect("monitoring:evaluator", agent_id, evaluator.pk)
    return _detail(request, evaluator, form, status=422)


@login_required
@require_POST
def evaluator_enable(request: AuthedRequest, agent_id: int, evaluator_id: int) -> HttpResponse:
    """POST enabled=1 turns it on, anything else off."""
    evaluator = _get_evaluator_for_user(request, agent_id, evaluator_id)
    enabled = request.POST.get("enabled") == "1"
    services.online_evaluator_update(evaluator=evaluator, user=request.user, settings={"enabled": enabled})
    messages.success(request, f"“{evaluator.name}” {'enabled' if enabled else 'disabled'}.")
    if request.POST.get("next") == "list":
        return redirect("monitoring:evaluators", agent_id)
    return redirect("monitoring:evaluator", agent_id, evaluator.pk)


@login_required
@require_POST
def evaluator_delete(request: AuthedRequest, agent_id: int, evaluator_id: int) -> HttpResponse:
    evaluator = _get_evaluator_for_user(request, agent_id, evaluator_id)
    services.online_evaluator_delete(evaluator=evaluator, user=request.user)
    messages.success(request, f"Online evaluator “{evaluator.name}” deleted, with its scores.")
    return redirect("monitoring:evaluators", agent_id)
