"""What the dataset view modules share (views.py: datasets and cases; transfer_views.py:
import and export; upload_views.py: uploads and documents): lookups that 404 outside the
user's teams, a service's errors put on a form, the upload size guard, and the dialog
pattern described in views.py (a form in a dialog, closed with a toast on success)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.forms import Form
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django_htmx.http import reswap, retarget, trigger_client_event

from agents.models import Agent
from agents.selectors import agent_get_for_user
from datasets import selectors
from datasets.extraction.services import NEEDS_MODEL
from datasets.models import TestCase
from datasets.upload_forms import UploadSizeGuard
from evalsite.http import AuthedRequest, is_partial

if TYPE_CHECKING:
    from datasets.selectors import DatasetWithCount


def get_agent_for_user(request: AuthedRequest, agent_id: int) -> Agent:
    return agent_get_for_user(user=request.user, agent_id=agent_id)


def get_dataset_for_user(request: AuthedRequest, agent_id: int, dataset_id: int) -> tuple[Agent, DatasetWithCount]:
    agent = get_agent_for_user(request, agent_id)
    dataset = selectors.dataset_get(agent=agent, dataset_id=dataset_id)
    if dataset is None:
        raise Http404("No such dataset")
    return agent, dataset


def get_case_for_user(
    request: AuthedRequest, agent_id: int, dataset_id: int, case_pk: int, *, with_documents: bool = False
) -> tuple[Agent, DatasetWithCount, TestCase]:
    """The case, its dataset and agent. with_documents prefetches the case's documents for
    pages that list them; the document views change them first, so they skip that query."""
    agent, dataset = get_dataset_for_user(request, agent_id, dataset_id)
    cases = TestCase.objects.filter(dataset=dataset, pk=case_pk)
    case = (cases.prefetch_related("documents") if with_documents else cases).first()
    if case is None:
        raise Http404("No such test case")
    case.dataset = dataset
    return agent, dataset, case


def add_service_errors(form: Form, exc: ValidationError) -> None:
    """Show a service's ValidationError on the form: on the field it names, else at the top."""
    if hasattr(exc, "error_dict"):
        for name, errors in exc.error_dict.items():
            for error in errors:
                form.add_error(name if name in form.fields else None, error)
    else:
        form.add_error(None, exc)


def needs_model(form: Form) -> bool:
    """The file was refused because only a model could read it: the page says how to connect one."""
    return any(error.code == NEEDS_MODEL for error in form.errors.as_data().get("file", []))


def size_guarded(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """For a view that takes an upload: cap the upload's size before Django stores it (check 5
    in docs/architecture.md). The guard must be in place before anything reads request.POST,
    and the CSRF check reads it, so the view is csrf_exempt on the outside, the guard goes in,
    then csrf_protect checks the token as usual. The view is called with `guard=`; its
    `too_big` says whether the upload was refused (never, for a GET: it has no body)."""
    protected = csrf_protect(view)

    @csrf_exempt
    @wraps(view)
    def wrapper(request: AuthedRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return protected(request, *args, guard=install_upload_guard(request), **kwargs)

    return wrapper


def install_upload_guard(request: HttpRequest) -> UploadSizeGuard:
    """The size cap as the first upload handler: before anything reads request.POST."""
    guard = UploadSizeGuard(request)
    request.upload_handlers.insert(0, guard)
    return guard


def upload_data(request: AuthedRequest) -> tuple[Any, Any]:
    """request.POST and request.FILES of a POST (parsing the body, so the guard's verdict
    is known afterwards), or (None, None) for an unbound form."""
    if request.method != "POST":
        return None, None
    return request.POST, request.FILES


def toast(response: HttpResponse, message: str, level: str = "success") -> HttpResponse:
    return trigger_client_event(response, "toast", {"message": message, "level": level})


def form_response(request: AuthedRequest, *, form_template: str, title: str, context: dict[str, Any]) -> HttpResponse:
    """One form, three callers: a dialog (htmx GET), the form alone (htmx POST with
    errors, swapped over itself) and a plain page (no JavaScript)."""
    context = {**context, "form_template": form_template, "title": title}
    if is_partial(request):
        template = form_template if request.method == "POST" else "datasets/partials/dialog.html"
        return render(request, template, context)
    return render(request, "datasets/form_page.html", context)


def dialog_done(
    request: AuthedRequest, *, message: str, next_url: str, events: tuple[str, ...] = (), level: str = "success"
) -> HttpResponse:
    """After a successful dialog form: close the dialog and refresh what changed (htmx),
    or redirect with a flash message (plain form)."""
    if not request.htmx:
        messages.add_message(request, messages.WARNING if level == "warning" else messages.SUCCESS, message)
        return redirect(next_url)
    response = HttpResponse("")
    retarget(response, "#dialog-slot")
    reswap(response, "innerHTML")
    for event in events:
        trigger_client_event(response, event)
    return toast(response, message, level)
