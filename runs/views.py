"""Run pages: the runs tab (search, one poll for the list), the run page (live summary and
result cards, filters, re-run), comparison, plus start and stop. Exports and the signed
document link for HTTP agents are runs/export_views.py."""

from __future__ import annotations

from itertools import groupby
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING, push_url, trigger_client_event

from agents.models import Agent
from agents.selectors import agent_get_for_user, agent_run_blocker
from datasets.models import Dataset
from datasets.selectors import dataset_run_blocker
from evalsite import paging
from evalsite.forms import form_messages
from evalsite.http import AuthedRequest, is_partial, navigate
from runs import run_page, selectors, services
from runs.comparing import comparison, history
from runs.comparing.baseline import baseline_box_get
from runs.comparing.matrix import run_matrix
from runs.engine import estimate
from runs.forms import CompareForm, MatrixForm, RerunForm, RescoreForm, ResultViewForm, RunStartForm
from runs.judging import configs as judging
from runs.models import Run
from runs.reports import tools
from runs.services import preflight as judge_preflight

RUNS_PER_PAGE = 30
# The list poll refreshes at most this many cards (the active ones the page shows).
POLL_MAX_RUNS = 100
# The state the suggestions panel reports (its hidden input "panel") while it waits for the
# run to end: suggestions.selectors.PanelState.ACTIVE.
SUGGESTIONS_WAITING = "active"


def _get_agent_for_user(request: AuthedRequest, agent_id: int) -> Agent:
    return agent_get_for_user(user=request.user, agent_id=agent_id)


def _get_run_for_user(
    request: AuthedRequest, agent_id: int, run_id: int, *, with_baseline: bool = False
) -> tuple[Agent, Run]:
    if not paging.in_range(agent_id, run_id):
        raise Http404("No such run")
    run = selectors.run_get_with_agent(user=request.user, agent_id=agent_id, run_id=run_id, with_baseline=with_baseline)
    return run.agent, run


def _error(request: AuthedRequest, error: ValidationError, fallback: str) -> HttpResponse:
    message = " ".join(error.messages)
    if request.htmx:
        return trigger_client_event(HttpResponse(status=422), "toast", {"message": message, "level": "error"})
    messages.error(request, message)
    return redirect(fallback)


# ---- start and stop -----------------------------------------------------------------


@login_required
@require_GET
def run_start_dialog(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    """The start dialog: the estimate, the run's cost cap, the monthly budget."""
    agent = _get_agent_for_user(request, agent_id)
    dataset = get_object_or_404(Dataset, pk=dataset_id, agent=agent)
    return _start_dialog(request, agent, dataset, RunStartForm(initial={"budget_cap": agent.team.run_budget}))


@login_required
@require_POST
def run_start(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    dataset = get_object_or_404(Dataset, pk=dataset_id, agent=agent)
    form = RunStartForm(request.POST)
    if not form.is_valid():
        return _start_dialog(request, agent, dataset, form)
    try:
        run = services.run_start(
            agent=agent,
            dataset=dataset,
            user=request.user,
            request_key=form.cleaned_data["request_key"],
            budget_cap=form.cap(),
            preflight=services.PREFLIGHT_REQUIRE,
            allow_failed_preflight=form.cleaned_data["allow_failed_preflight"],
        )
    except ValidationError as error:
        if error.code in (services.JUDGE_NOT_PREFLIGHTED, services.JUDGE_FAILED_PREFLIGHT):
            # Said in the dialog, beside what the judge did on the calibration set.
            form.add_error(None, error)
            return _start_dialog(request, agent, dataset, form)
        return _error(request, error, reverse("datasets:detail", args=[agent.pk, dataset.pk]))
    messages.success(request, "Evaluation run started")
    return navigate(request, reverse("runs:detail", args=[agent.pk, run.pk]))


def _start_dialog(request: AuthedRequest, agent: Agent, dataset: Dataset, form: RunStartForm) -> HttpResponse:
    forecast = estimate.run_estimate(agent=agent, dataset=dataset, concurrency=settings.EVALSITE_RUN_CONCURRENCY)
    blocker = dataset_run_blocker(dataset=dataset, case_count=forecast.cases) or agent_run_blocker(agent=agent)
    config = judging.dataset_judge_config(dataset=dataset)
    if not blocker and judge_preflight.judge_preflight_needed(config):
        # The judge is checked while the user reads the estimate; the panel polls until it is done.
        judge_preflight.judge_preflight_start(config=config)
    context = {
        "agent": agent,
        "dataset": dataset,
        "form": form,
        "estimate": forecast,
        "monthly": estimate.team_month_budget(team=agent.team),
        "run_blocker": blocker,
        "judge": config,
        "judge_state": judge_preflight.judge_preflight_state(config=config),
    }
    if not is_partial(request):
        return render(request, "runs/run_start.html", context)
    template = "runs/partials/start_form.html" if request.method == "POST" else "runs/partials/start_dialog.html"
    return render(request, template, context)


@login_required
@require_GET
def run_start_preflight(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    """The start dialog's judge panel while the judge's preflight runs (it polls this); 286 once done."""
    agent = _get_agent_for_user(request, agent_id)
    dataset = get_object_or_404(Dataset, pk=dataset_id, agent=agent)
    config = judging.dataset_judge_config(dataset=dataset)
    state = judge_preflight.judge_preflight_state(config=config)
    if not is_partial(request):
        return redirect("runs:start_dialog", agent.pk, dataset.pk)
    context = {"agent": agent, "dataset": dataset, "judge": config, "judge_state": state}
    status = 200 if state == "running" else HTMX_STOP_POLLING
    return render(request, "runs/partials/preflight_panel.html", context, status=status)


@login_required
@require_POST
def run_stop(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    agent, run = _get_run_for_user(request, agent_id, run_id)
    try:
        services.run_stop(run=run)
    except ValidationError as error:
        messages.info(request, " ".join(error.messages))
    else:
        messages.success(request, "Run stopped. Finished results are kept.")
    return navigate(request, reverse("runs:detail", args=[agent.pk, run.pk]))


@login_required
@require_POST
def run_baseline(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """Pin the run as its dataset's baseline (action=pin) or unpin it (action=unpin)."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    try:
        if request.POST.get("action") == "unpin":
            services.dataset_baseline_unpin(run=run)
            messages.success(request, "Baseline unpinned.")
        else:
            services.dataset_baseline_pin(run=run, user=request.user)
            messages.success(request, f"Run #{run.pk} is now the baseline of “{run.dataset_name}”.")
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    return navigate(request, reverse("runs:detail", args=[agent.pk, run.pk]) + "?tab=baseline#baseline")


@login_required
@require_POST
def run_rerun(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    agent, run = _get_run_for_user(request, agent_id, run_id)
    run_url = reverse("runs:detail", args=[agent.pk, run.pk])
    form = RerunForm(request.POST, agent=agent)
    if not form.is_valid():
        return _error(request, ValidationError("Pick one of this agent's versions."), run_url)
    try:
        child = services.run_rerun(
            run=run,
            user=request.user,
            request_key=form.cleaned_data["request_key"],
            version=form.cleaned_data["version"],
        )
    except ValidationError as error:
        return _error(request, error, run_url)
    cases = child.cases.count()
    messages.success(
        request, f"Re-run started: {cases} failed or errored case{'s' if cases != 1 else ''} of run #{run.pk}."
    )
    return navigate(request, reverse("runs:detail", args=[agent.pk, child.pk]))


@login_required
@require_POST
def run_rescore(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    agent, run = _get_run_for_user(request, agent_id, run_id)
    run_url = reverse("runs:detail", args=[agent.pk, run.pk])
    form = RescoreForm(request.POST, run=run)
    if not form.is_valid():
        return _error(request, ValidationError(form_messages(form)), run_url)
    try:
        child = services.run_rescore(
            run=run,
            user=request.user,
            request_key=form.cleaned_data["request_key"],
            judge_config=form.cleaned_data["judge_config"],
        )
    except ValidationError as error:
        return _error(request, error, run_url)
    messages.success(request, f"Re-score started: the answers of run #{run.pk} are being judged again.")
    return navigate(request, reverse("runs:detail", args=[agent.pk, child.pk]))


# ---- the runs tab -----------------------------------------------------------------------


@login_required
@require_GET
def run_list(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    query = request.GET.get("q", "").strip()[:120]
    page = paging.page_number(request.GET.get("page"))
    offset = (page - 1) * RUNS_PER_PAGE
    runs = list(selectors.run_list(agent=agent, query=query)[offset : offset + RUNS_PER_PAGE + 1])
    has_more = len(runs) > RUNS_PER_PAGE
    runs = runs[:RUNS_PER_PAGE]
    context = {
        "agent": agent,
        "runs": runs,
        "query": query,
        "page": page,
        "has_more": has_more,
        "has_any": bool(runs) or (bool(query) and Run.objects.filter(agent=agent).exists()),
        "poll_url": _list_poll_url(agent, runs, query, newest=page == 1),
        "now": timezone.now(),
        "monthly": estimate.team_month_budget(team=agent.team),
    }
    template = "runs/run_list.html#cards" if is_partial(request) else "runs/run_list.html"
    return render(request, template, context)


@login_required
@require_GET
def run_list_poll(request: AuthedRequest, agent_id: int) -> HttpResponse:
    """One poll for the whole list: the active cards it names, refreshed, and runs started
    since (prepended); 286 once none of them is active."""
    agent = _get_agent_for_user(request, agent_id)
    query = request.GET.get("q", "").strip()[:120]
    ids = _int_list(request.GET.get("ids", ""))[:POLL_MAX_RUNS]
    runs = selectors.run_list(agent=agent)
    updated = list(runs.filter(pk__in=ids)) if ids else []
    newest = request.GET.get("newest", "")
    fresh = (
        list(selectors.run_list(agent=agent, query=query).filter(pk__gt=int(newest))[:RUNS_PER_PAGE])
        if newest.isdigit()
        else []
    )
    shown = fresh + updated
    poll_url = _list_poll_url(agent, shown, query, newest=newest.isdigit(), newest_id=int(newest or 0))
    context = {"agent": agent, "updated": updated, "fresh": fresh, "poll_url": poll_url, "now": timezone.now()}
    status = 200 if poll_url else HTMX_STOP_POLLING
    return render(request, "runs/partials/run_list_poll.html", context, status=status)


def _list_poll_url(agent: Agent, runs: list[Run], query: str, *, newest: bool, newest_id: int = 0) -> str:
    """The list poll's URL while any card shown is active, else "" (no polling)."""
    active = [run.pk for run in runs if run.is_active]
    if not active:
        return ""
    params = {"ids": ",".join(map(str, active))}
    if newest:
        params["newest"] = str(max([newest_id, *(run.pk for run in runs)]))
    if query:
        params["q"] = query
    return f"{reverse('runs:list_poll', args=[agent.pk])}?{urlencode(params)}"


# ---- the run page ---------------------------------------------------------------------


@login_required
@require_GET
def run_detail(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """The run page (runs/run_page.py reads what it shows). Its htmx variant is the live poll:
    the summary, the cards of cases finished since the page's cursor, and the filter counts;
    286 once the run settled."""
    agent, run = _get_run_for_user(request, agent_id, run_id, with_baseline=True)
    view = ResultViewForm(request.GET).view()
    if is_partial(request):
        return _live(request, agent, run, view)
    status = selectors.run_status_counts(run=run)
    counts = selectors.case_counts(run=run, status=status)
    tab = run_page.tab_get(request.GET)
    context = {
        "agent": agent,
        "run": run,
        "view": view,
        **run_page.summary_context(run, counts),
        **_tab_context(agent, run, view, tab, counts=counts, status=status),
        "tab": tab,
        "tabs": run_page.tab_links(tab, counts["all"]),
        "parent": run.parent,
        "related": list(selectors.run_related_list(run=run)[:10]),
        "compare_with": selectors.run_compare_default(run=run),
        "rerun_form": RerunForm(agent=agent),
        "rescore_form": RescoreForm(run=run),
        "repeat_calls": selectors.run_repeats(run=run),
    }
    return render(request, "runs/run_detail.html", context)


def _tab_context(
    agent: Agent,
    run: Run,
    view: dict[str, Any],
    tab: str,
    *,
    counts: dict[str, int],
    status: selectors.StatusCounts,
) -> dict[str, Any]:
    """What the tab shown reads, and only that: the others cost the page nothing."""
    if tab == "charts":
        # An active run's charts come after the page (their own request): they group every result.
        return {"charts_lazy": True} if run.is_active else run_page.charts_context(run, status)
    if tab == "baseline":
        return {"baseline_box": baseline_box_get(run=run)}
    if tab in run_page.CARD_TABS:  # the review tab's figures load after the page, on their own
        return {**run_page.results_context(agent, run, view, counts=counts, tab=tab), "cards_shown": True}
    return {}  # the suggestions panel reads its own


@login_required
@require_GET
def run_tools(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """The tool-call table (runs/reports/tools.py); the run page loads it after the page, so the
    page's own query budget does not grow with it."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    context = {"agent": agent, "run": run, "tool_rows": tools.run_tool_table(run=run)}
    template = "runs/partials/tool_table.html" if is_partial(request) else "runs/run_tools.html"
    return render(request, template, context)


@login_required
@require_GET
def run_charts(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """The run's charts (the score histogram, the pass rate per tag): an active run's page
    loads them after itself; a finished run's page has them inline (drawn once)."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    context = {"agent": agent, "run": run, "oob": False, **run_page.charts_context(run)}
    return render(request, "runs/partials/charts.html", context)


RUN_FINISHED_EVENT = "run-finished"


def _live(request: AuthedRequest, agent: Agent, run: Run, view: dict[str, Any]) -> HttpResponse:
    tab = run_page.tab_get(request.GET)
    context = run_page.live_context(agent, run, view, tab=tab)
    settled = context["settled"]
    context.pop("fresh")
    if not run.is_active and tab == "charts":
        # Every response once the run is over carries the final charts, so the header and the
        # charts never disagree while the summary is still being written (they are cached).
        context.update(run_page.charts_context(run, context["status_counts"]))
    if not run.is_active and request.GET.get("panel") == SUGGESTIONS_WAITING:
        # The page still shows "suggestions come when the run finishes": this response, which
        # is the first to show the run ended, brings the panel (the panel polls itself after;
        # its template loads its own data, so runs/ imports nothing of suggestions).
        context["panel_oob"] = True
    response = render(request, "runs/partials/run_live.html", context, status=HTMX_STOP_POLLING if settled else 200)
    if not run.is_active:
        # The panels loaded on their own (Human review) refresh on it, and an open "Stop this
        # run?" dialog closes (static/js/runs.js).
        response["HX-Trigger"] = RUN_FINISHED_EVENT
    return response


@login_required
@require_GET
def run_results(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """The result list for another filter or order (htmx), or the next page of cards."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    if not is_partial(request):
        query = request.GET.urlencode()
        return redirect(reverse("runs:detail", args=[agent.pk, run.pk]) + (f"?{query}" if query else "") + "#results")
    view = ResultViewForm(request.GET).view()
    context = run_page.results_context(agent, run, view, tab=run_page.tab_get(request.GET))
    if "after" in request.GET or "offset" in request.GET:
        # The next page: the poll's cursor grows by its finished cases (the page sends its own).
        seen = selectors.seen_decode(view["seen"]) | selectors.seen_decode(context["seen"])
        context["seen"] = selectors.seen_encode(seen)
        return render(request, "runs/partials/result_more.html", context)
    response = render(request, "runs/partials/result_list.html", context)
    # The address bar shows the run page with this filter and order, so a reload or a shared
    # link opens the same view.
    state = (
        ("filter", view["filter"]),
        ("sort", view["sort"]),
        ("expand", view["expand"]),
        ("tab", context["list_tab"]),
    )
    query = urlencode({k: v for k, v in state if v not in ("all", "position", "")})
    return push_url(response, reverse("runs:detail", args=[agent.pk, run.pk]) + (f"?{query}" if query else ""))


# ---- history across versions ----------------------------------------------------------


@login_required
@require_GET
def run_history(request: AuthedRequest, agent_id: int) -> HttpResponse:
    """Pass rate and mean score per agent version and dataset; the agent page loads the fragment."""
    agent = _get_agent_for_user(request, agent_id)
    template = "runs/partials/history.html" if is_partial(request) else "runs/run_history.html"
    return render(request, template, history.history_context(agent))


# ---- comparison -------------------------------------------------------------------


@login_required
@require_GET
def run_compare(request: AuthedRequest, agent_id: int) -> HttpResponse:
    """Two runs (a, b) case by case, or two to five (runs=...) as a matrix of cases x runs."""
    agent = _get_agent_for_user(request, agent_id)
    matrix_form = MatrixForm(request.GET, agent=agent) if "runs" in request.GET else None
    form = CompareForm(None if matrix_form else request.GET or None, agent=agent)
    compared = None
    if form.is_valid():
        compared = comparison.run_compare(a=form.cleaned_data["a"], b=form.cleaned_data["b"], answers=True)
    runs = list(selectors.run_list(agent=agent)[:300])
    context = {
        "agent": agent,
        "form": form,
        "comparison": compared,
        "matrix_form": matrix_form,
        "matrix": run_matrix(runs=matrix_form.cleaned_data["runs"]) if matrix_form and matrix_form.is_valid() else None,
        "run_groups": [
            (name, list(group)) for name, group in groupby(sorted(runs, key=_dataset_key), key=_dataset_label)
        ],
        "selected_a": _selected(form, "a"),
        "selected_b": _selected(form, "b"),
        "selected_runs": request.GET.getlist("runs"),
    }
    template = "runs/run_compare.html#body" if is_partial(request) else "runs/run_compare.html"
    return render(request, template, context)


def _dataset_key(run: Run) -> tuple[str, int]:
    return (run.dataset_name.lower(), -run.pk)


def _dataset_label(run: Run) -> str:
    return run.dataset_name


def _selected(form: CompareForm, name: str) -> str:
    return str(form.data.get(name, "")) if form.is_bound else ""


# ---- helpers -------------------------------------------------------------------------


def _int_list(value: str) -> list[int]:
    """The ids a poll URL names; one the database cannot hold names no run."""
    ids = [int(part) for part in value.split(",") if part.strip().isdigit()]
    return [pk for pk in ids if paging.in_range(pk)]
