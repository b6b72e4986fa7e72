"""The coverage page of a dataset: which rules of the agent its cases test, and how they fare."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from agents.models import Agent, AgentVersion
from agents.selectors import agent_get_for_user
from datasets.coverage import rule_map_adopt, rule_map_start
from datasets.generation.services import MAX_CASES, dataset_generate_more
from datasets.models import Dataset, RuleMap
from datasets.selectors import dataset_get
from evalsite import llm
from evalsite.http import AuthedRequest, navigate
from runs.models import Run
from runs.reports.coverage import coverage_summary, coverage_view


def _get_dataset_for_user(
    request: AuthedRequest, agent_id: int, dataset_id: int
) -> tuple[Agent, Dataset, AgentVersion]:
    """The agent, its dataset, and the version whose rules are shown (`version`, a pk in the
    query or the form; else the current one)."""
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    dataset = dataset_get(agent=agent, dataset_id=dataset_id)
    if dataset is None:
        raise Http404("No such dataset")
    raw = request.GET.get("version") or request.POST.get("version") or ""
    version = agent.versions.filter(pk=int(raw)).first() if raw.isdigit() else agent.current_version
    if version is None:
        raise Http404("The agent has no version")
    version.agent = agent
    return agent, dataset, version


def _run(request: AuthedRequest, dataset: Dataset, version: AgentVersion) -> Run | None:
    raw = request.GET.get("run", "")
    if not raw.isdigit():
        return None
    return Run.objects.filter(pk=int(raw), dataset=dataset, agent_version=version).first()


def _page_url(agent: Agent, dataset: Dataset, version: AgentVersion) -> str:
    return f"{reverse('coverage:page', args=[agent.pk, dataset.pk])}?version={version.pk}"


@login_required
@require_GET
def coverage_page(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    agent, dataset, version = _get_dataset_for_user(request, agent_id, dataset_id)
    view = coverage_view(dataset=dataset, version=version, run=_run(request, dataset, version))
    context = {
        "agent": agent,
        "dataset": dataset,
        "view": view,
        "summary": coverage_summary(view),
        "versions": agent.versions.order_by("-number"),
        "model_configured": llm.is_configured("llm"),
        "suggested_count": min(MAX_CASES, max(1, len(view.uncovered))),
        "generating": dataset.status == Dataset.Status.EXTRACTING,
        "mapping": view.rule_map is not None
        and view.rule_map.status in (RuleMap.Status.QUEUED, RuleMap.Status.RUNNING),
    }
    if request.htmx and request.GET.get("poll"):
        response = render(request, "runs/coverage.html#coverage_body", context)
        if not (context["generating"] or context["mapping"]):
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "runs/coverage.html", context)


@login_required
@require_POST
def coverage_map(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    """Start the model's map of cases to rules (a worker job; the page polls it)."""
    agent, dataset, version = _get_dataset_for_user(request, agent_id, dataset_id)
    try:
        rule_map_start(dataset=dataset, version=version, user=request.user)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, "Mapping the cases to the rules with the model. This page updates when it is done.")
    return navigate(request, _page_url(agent, dataset, version))


@login_required
@require_POST
def coverage_adopt(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    """Use the model's map that was kept as a proposal because it ties fewer rules than the word map."""
    agent, dataset, version = _get_dataset_for_user(request, agent_id, dataset_id)
    raw = request.POST.get("map", "")
    rule_map = RuleMap.objects.filter(pk=int(raw), dataset=dataset, version=version).first() if raw.isdigit() else None
    if rule_map is None:
        raise Http404("No such map")
    try:
        rule_map_adopt(rule_map=rule_map)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, "The model's map is used for this version's coverage now.")
    return navigate(request, _page_url(agent, dataset, version))


@login_required
@require_POST
def coverage_generate(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    """Generate cases for the rules no case tests yet, appended to this dataset."""
    agent, dataset, version = _get_dataset_for_user(request, agent_id, dataset_id)
    view = coverage_view(dataset=dataset, version=version)
    raw = request.POST.get("count", "")
    try:
        if not raw.isdigit():
            raise ValidationError("Give the number of test cases to write.")
        dataset_generate_more(dataset=dataset, user=request.user, rules=view.uncovered, count=int(raw))
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        rules = len(view.uncovered)
        messages.success(request, f"Writing {raw} test case(s) for {rules} uncovered rule{'s' * (rules != 1)}.")
    return navigate(request, _page_url(agent, dataset, version))
