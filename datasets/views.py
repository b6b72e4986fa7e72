"""Dataset pages: the Datasets tab, a dataset's page, and its test cases.

Dialog pattern: an htmx GET renders the form inside a <dialog data-autoopen> swapped into
#dialog-slot; the form posts back with hx-target="this", so errors re-render the form in
place; success empties #dialog-slot (closing the dialog) and fires events that refresh
the region concerned. Without JavaScript the same URLs are ordinary pages.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Page, Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import (
    HTMX_STOP_POLLING,
    HttpResponseClientRedirect,
    HttpResponseClientRefresh,
    trigger_client_event,
)

from agents import selectors as agent_selectors
from agents.models import Agent
from datasets import selectors, services
from datasets.coverage import rule_chips_attach
from datasets.extraction.services import dataset_upload_create
from datasets.forms import CaseForm, DatasetCreateForm, DatasetRenameForm, DatasetSettingsForm
from datasets.models import Dataset, TestCase
from datasets.upload_forms import DocumentUploadForm, UploadSizeGuard
from datasets.view_helpers import (
    add_service_errors,
    dialog_done,
    form_response,
    get_agent_for_user,
    get_case_for_user,
    get_dataset_for_user,
    needs_model,
    size_guarded,
    toast,
    upload_data,
)
from evalsite.http import AuthedRequest, is_partial, navigate

if TYPE_CHECKING:
    from datasets.selectors import DatasetWithCount

CASES_PER_PAGE = 25
DATASETS_PER_PAGE = 100


# ---- the Datasets tab ----------------------------------------------------------


def _table_context(agent: Agent, page_number: str | None = None) -> dict[str, Any]:
    page = Paginator(selectors.dataset_list(agent=agent), DATASETS_PER_PAGE).get_page(page_number)
    datasets = list(page.object_list)
    return {
        "agent": agent,
        "datasets": datasets,
        "page": page,
        "polling": any(d.status == Dataset.Status.EXTRACTING for d in datasets),
    }


@login_required
@require_GET
def dataset_list(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = get_agent_for_user(request, agent_id)
    context = _table_context(agent, request.GET.get("page"))
    if is_partial(request):
        return render(request, "datasets/partials/dataset_table.html", context)
    context["at_limit"] = context["page"].paginator.count >= _limit()
    context["limit"] = _limit()
    return render(request, "datasets/list.html", context)


@login_required
@require_GET
def dataset_list_rows(request: AuthedRequest, agent_id: int) -> HttpResponse:
    """The list's poll: refreshed every 3 s while a dataset is Extracting; 286 stops it."""
    agent = get_agent_for_user(request, agent_id)
    context = _table_context(agent, request.GET.get("page"))
    response = render(request, "datasets/partials/dataset_table.html", context)
    if not context["polling"]:
        response.status_code = HTMX_STOP_POLLING
    return response


def _limit() -> int:
    return settings.EVALSITE_MAX_DATASETS_PER_AGENT


@login_required
@require_http_methods(["GET", "POST"])
@size_guarded
def dataset_create(request: AuthedRequest, agent_id: int, guard: UploadSizeGuard) -> HttpResponse:
    """A new dataset, empty or filled from a CSV or EvalSet JSON file."""
    agent = get_agent_for_user(request, agent_id)
    data, files = upload_data(request)
    form = DatasetCreateForm(data, files, too_big=guard.too_big)
    if request.method == "POST" and form.is_valid():
        try:
            dataset, message, level = _create(request, agent, form)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            url = reverse("datasets:detail", args=[agent.pk, dataset.pk])
            messages.add_message(request, messages.WARNING if level == "warning" else messages.SUCCESS, message)
            return navigate(request, url)
    context = {
        "agent": agent,
        "form": form,
        "at_limit": agent.datasets.count() >= _limit(),
        "needs_model": needs_model(form),
    }
    return form_response(
        request, form_template="datasets/partials/create_form.html", title="New dataset", context=context
    )


def _create(request: AuthedRequest, agent: Agent, form: DatasetCreateForm) -> tuple[Dataset, str, str]:
    name = form.cleaned_data["name"]
    file = form.cleaned_data.get("file")
    if file is None:
        dataset = services.dataset_create(agent=agent, user=request.user, name=name)
        return dataset, f"Dataset “{dataset.name}” created. Add its first test case.", "success"
    if form.validated is not None:
        # A test plan: read like an upload; tables stop at the mapping step before any case exists.
        dataset = dataset_upload_create(
            agent=agent,
            user=request.user,
            name=name or PurePath(form.validated.original_name).stem[:120] or "Uploaded test plan",
            upload=file,
            validated=form.validated,
        )
        return dataset, f"Reading “{form.validated.original_name}”…", "success"
    dataset, result = services.dataset_create_from_file(agent=agent, user=request.user, name=name, file=file)
    return dataset, f"Dataset “{dataset.name}” created. {result.message}", result.level


@login_required
@require_GET
def dataset_row(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    """One row of the list (cancelling an inline rename)."""
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    if not is_partial(request):
        return redirect("datasets:list", agent.pk)
    return render(request, "datasets/partials/dataset_row.html", {"agent": agent, "dataset": dataset})


@login_required
@require_http_methods(["GET", "POST"])
def dataset_rename(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    """Inline in a list row (`in=row`, the default) or in a dialog on the dataset page (`in=dialog`)."""
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    place = "dialog" if request.GET.get("in", request.POST.get("in")) == "dialog" else "row"
    form = DatasetRenameForm(request.POST or None, initial={"name": dataset.name})
    if request.method == "POST" and form.is_valid():
        try:
            services.dataset_rename(dataset=dataset, name=form.cleaned_data["name"])
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            return _renamed(request, agent, dataset, place)
    context = {"agent": agent, "dataset": dataset, "form": form, "place": place}
    if is_partial(request) and place == "row":
        return render(request, "datasets/partials/dataset_row.html", {**context, "editing": True})
    return form_response(
        request, form_template="datasets/partials/rename_form.html", title="Rename dataset", context=context
    )


def _renamed(request: AuthedRequest, agent: Agent, dataset: Dataset, place: str) -> HttpResponse:
    message = f"Renamed to “{dataset.name}”."
    if place == "dialog" or not request.htmx:
        messages.success(request, message)
        if request.htmx:
            return HttpResponseClientRefresh()  # the heading, title and breadcrumbs all change
        if place == "dialog":
            return redirect("datasets:detail", agent.pk, dataset.pk)
        return redirect("datasets:list", agent.pk)
    fresh = selectors.dataset_get(agent=agent, dataset_id=dataset.pk)  # fresh case count
    response = render(request, "datasets/partials/dataset_row.html", {"agent": agent, "dataset": fresh})
    return toast(response, message)


@login_required
@require_http_methods(["GET", "POST"])
def dataset_delete(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    from_detail = request.POST.get("from", request.GET.get("from")) == "detail"
    if request.method == "POST":
        name = dataset.name
        services.dataset_delete(dataset=dataset)
        message = f"Deleted “{name}”."
        list_url = reverse("datasets:list", args=[agent.pk])
        if request.htmx and from_detail:
            messages.success(request, message)
            return HttpResponseClientRedirect(list_url)
        return dialog_done(request, message=message, next_url=list_url, events=("datasetsChanged",))
    context = {
        "agent": agent,
        "dataset": dataset,
        "from_detail": from_detail,
        "document_count": dataset.documents.count(),
        "run_count": dataset.runs.count(),
    }
    return form_response(
        request, form_template="datasets/partials/delete_form.html", title="Delete dataset", context=context
    )


# ---- a dataset's page ----------------------------------------------------------


def _case_page(request: AuthedRequest, dataset: Dataset, page_number: Any = None) -> tuple[Page, str]:
    query = request.GET.get("q", "").strip()[:200]
    flaky = request.GET.get("flaky") == "1"
    paginator = Paginator(selectors.case_search(dataset=dataset, query=query, flaky=flaky), CASES_PER_PAGE)
    return paginator.get_page(page_number or request.GET.get("page")), query


def _case_list_context(
    agent: Agent, dataset: Dataset, page: Page, query: str, total: int, flaky: bool = False
) -> dict[str, Any]:
    rule_chips_attach(dataset=dataset, version=agent.current_version, page=page)
    # run_blocker too: an htmx refresh of the list re-renders the Run button out of band.
    run_blocker = selectors.dataset_run_blocker(dataset=dataset, case_count=total) or agent_selectors.agent_run_blocker(
        agent=agent
    )
    return {
        "agent": agent,
        "dataset": dataset,
        "page": page,
        "query": query,
        "total": total,
        "run_blocker": run_blocker,
        "flaky": flaky,
    }


def _detail(request: AuthedRequest, agent: Agent, dataset: DatasetWithCount) -> HttpResponse:
    page, query = _case_page(request, dataset)
    total = dataset.case_count  # annotated by the selector
    context = _case_list_context(agent, dataset, page, query, total, request.GET.get("flaky") == "1")
    if is_partial(request):
        return render(request, "datasets/partials/case_list.html", context)
    context.update(
        settings_form=DatasetSettingsForm.for_dataset(dataset),
        default_judge_model=_default_judge_model(),
    )
    return render(request, "datasets/detail.html", context)


def _default_judge_model() -> str:
    return settings.EVALSITE_JUDGE_MODEL or settings.EVALSITE_LLM_MODEL


@login_required
@require_GET
def dataset_detail(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    return _detail(request, agent, dataset)


@login_required
@require_GET
def case_search(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    """Search as you type and pagination: the case list fragment (the whole page without htmx)."""
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    return _detail(request, agent, dataset)


@login_required
@require_http_methods(["GET", "POST"])
def dataset_settings(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    form = DatasetSettingsForm.for_dataset(dataset, request.POST or None)
    saved = False
    if request.method == "POST" and form.is_valid():
        try:
            services.dataset_update_settings(dataset=dataset, **form.cleaned_data)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            if not request.htmx:
                messages.success(request, "Scoring settings saved.")
                return redirect("datasets:detail", agent.pk, dataset.pk)
            saved = True
            form = DatasetSettingsForm.for_dataset(dataset)
    context = {
        "agent": agent,
        "dataset": dataset,
        "settings_form": form,
        "settings_open": True,
        "default_judge_model": _default_judge_model(),
    }
    if is_partial(request):
        response = render(request, "datasets/partials/settings_form.html", context)
        return toast(response, "Scoring settings saved.") if saved else response
    return render(request, "datasets/settings.html", context)


# ---- test cases ----------------------------------------------------------------


def _case_form_context(agent: Agent, dataset: Dataset, form: CaseForm, case: TestCase | None) -> dict[str, Any]:
    # attach_form: the case's documents block (datasets/partials/case_documents.html).
    return {
        "agent": agent,
        "dataset": dataset,
        "form": form,
        "case": case,
        "attach_form": DocumentUploadForm() if case is not None else None,
        "dialog_class": "wide",
    }


@login_required
@require_http_methods(["GET", "POST"])
def case_create(request: AuthedRequest, agent_id: int, dataset_id: int) -> HttpResponse:
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    form = CaseForm(request.POST or None, dataset=dataset)
    if request.method == "POST" and form.is_valid():
        try:
            services.case_create(dataset=dataset, **form.case_fields())
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            if "add_another" in request.POST:
                return _added_another(request, agent, dataset)
            detail_url = reverse("datasets:detail", args=[agent.pk, dataset.pk])
            return dialog_done(request, message="Test case added.", next_url=detail_url, events=("casesChanged",))
    context = _case_form_context(agent, dataset, form, None)
    return form_response(
        request, form_template="datasets/partials/case_form.html", title="Add test case", context=context
    )


def _added_another(request: AuthedRequest, agent: Agent, dataset: Dataset) -> HttpResponse:
    """ "Save and add another": a fresh form in place, the list behind it refreshed."""
    if not request.htmx:
        messages.success(request, "Test case added. Add the next one.")
        return redirect("datasets:case_create", agent.pk, dataset.pk)
    context = _case_form_context(agent, dataset, CaseForm(dataset=dataset), None)
    response = render(request, "datasets/partials/case_form.html", context)
    trigger_client_event(response, "casesChanged")
    return toast(response, "Test case added. Add the next one.")


@login_required
@require_http_methods(["GET", "POST"])
def case_edit(request: AuthedRequest, agent_id: int, dataset_id: int, case_pk: int) -> HttpResponse:
    agent, dataset, case = get_case_for_user(request, agent_id, dataset_id, case_pk, with_documents=True)
    form = CaseForm(request.POST or None, dataset=dataset, case=case)
    if request.method == "POST" and form.is_valid():
        try:
            services.case_update(case=case, **form.case_fields())
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            detail_url = reverse("datasets:detail", args=[agent.pk, dataset.pk])
            return dialog_done(request, message="Test case saved.", next_url=detail_url, events=("casesChanged",))
    context = _case_form_context(agent, dataset, form, case)
    return form_response(
        request, form_template="datasets/partials/case_form.html", title="Edit test case", context=context
    )


@login_required
@require_http_methods(["GET", "POST"])
def case_delete(request: AuthedRequest, agent_id: int, dataset_id: int, case_pk: int) -> HttpResponse:
    agent, dataset, case = get_case_for_user(request, agent_id, dataset_id, case_pk, with_documents=True)
    if request.method == "POST":
        services.case_delete(case=case)
        detail_url = reverse("datasets:detail", args=[agent.pk, dataset.pk])
        return dialog_done(request, message="Test case deleted.", next_url=detail_url, events=("casesChanged",))
    context = {"agent": agent, "dataset": dataset, "case": case}
    return form_response(
        request, form_template="datasets/partials/case_delete_form.html", title="Delete test case", context=context
    )


@login_required
@require_POST
def case_move(request: AuthedRequest, agent_id: int, dataset_id: int, case_pk: int) -> HttpResponse:
    """Move a case one place up or down (or to the top or bottom) in the dataset's order."""
    agent, dataset, case = get_case_for_user(request, agent_id, dataset_id, case_pk, with_documents=True)
    direction = request.POST.get("direction", "")
    current = selectors.case_index(case=case)
    targets = {"up": current - 1, "down": current + 1, "top": 0, "bottom": dataset.case_count}
    if direction not in targets:
        return HttpResponse("Unknown direction.", status=400)
    index = services.case_move(case=case, to_index=targets[direction])
    if not request.htmx:
        return redirect(f"{reverse('datasets:detail', args=[agent.pk, dataset.pk])}?page={index // CASES_PER_PAGE + 1}")
    # Show the page the case landed on, with focus kept on the button that moved it.
    paginator = Paginator(selectors.case_search(dataset=dataset), CASES_PER_PAGE)
    page = paginator.get_page(index // CASES_PER_PAGE + 1)
    context = _case_list_context(agent, dataset, page, "", dataset.case_count)
    context.update(moved_pk=case.pk, moved_direction=direction)
    return render(request, "datasets/partials/case_list.html", context)
