"""The "Generate with AI" tab of the Generate Dataset page (datasets/new.html) posts here."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from agents.models import Agent
from agents.selectors import agent_get_for_user
from datasets.generation.forms import GenerateForm
from datasets.generation.services import dataset_generate_create
from evalsite.http import AuthedRequest, navigate


def _get_agent_for_user(request: AuthedRequest, agent_id: int) -> Agent:
    return agent_get_for_user(user=request.user, agent_id=agent_id)


@login_required
@require_POST
def dataset_generate(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    form = GenerateForm(request.POST)
    if form.is_valid():
        try:
            dataset = dataset_generate_create(agent=agent, user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            _add_errors(form, exc)
        else:
            url = reverse("datasets:detail", args=[agent.pk, dataset.pk])
            return navigate(request, url)
    # The same page and tab again, with the errors next to their fields (200, so htmx swaps it in).
    context = {"agent": agent, "tab": "generate", "generate_form": form}
    template = "datasets/partials/generate_tab.html#generate_form" if request.htmx else "datasets/new.html"
    return render(request, template, context)


def _add_errors(form: GenerateForm, exc: ValidationError) -> None:
    if not hasattr(exc, "error_dict"):
        form.add_error(None, exc)
        return
    for name, errors in exc.error_dict.items():
        for error in errors:
            form.add_error(name if name in form.fields else None, error)
