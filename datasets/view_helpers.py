"""What both dataset view modules need (views.py: datasets and cases; upload_views.py:
uploads and documents): lookups that 404 outside the user's teams, a service's errors
put on a form, and the upload size guard."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.forms import Form
from django.http import Http404

from agents.models import Agent
from agents.selectors import agent_get_for_user
from datasets import selectors
from datasets.models import TestCase
from datasets.upload_forms import UploadSizeGuard
from evalsite.http import AuthedRequest

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


def install_upload_guard(request: AuthedRequest) -> UploadSizeGuard:
    """Cap an upload's size before Django stores it (check 5 in docs/architecture.md): must run before
    anything reads request.POST, hence csrf_exempt outside and csrf_protect inside."""
    guard = UploadSizeGuard(request)
    request.upload_handlers.insert(0, guard)
    return guard
