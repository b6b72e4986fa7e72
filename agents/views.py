"""Agent pages: list, create, configuration, edit, delete, versions (compare, roll back)."""

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import trigger_client_event

from agents import selectors, services
from agents.adapters import split_passages
from agents.diff import MASK, version_diff
from agents.forms import AgentEditor
from agents.models import Agent, AgentVersion
from evalsite import llm
from evalsite.http import AuthedRequest, is_partial, navigate


def _get_agent_for_user(request: AuthedRequest, agent_id: int) -> Agent:
    return selectors.agent_get_for_user(user=request.user, agent_id=agent_id)


def _config_display(version: AgentVersion | None) -> dict[str, Any]:
    """Presentation helpers for the read-only configuration partial."""
    if version is None:
        return {}
    tools = [
        {**tool, "parameters_json": json.dumps(tool.get("parameters") or {}, indent=2, ensure_ascii=False)}
        for tool in version.tools or []
    ]
    # Counted the way the knowledge agent splits its text when it answers.
    passages = split_passages(version.knowledge or "")
    return {
        "tools": tools,
        "passages": len(passages),
        "default_model": llm.model_for("llm"),
        "default_llm_timeout": f"{llm.timeout_for('agent'):g}",
    }


# ---- list and create -----------------------------------------------------------


@login_required
@require_GET
def agent_list(request: AuthedRequest) -> HttpResponse:
    if request.team is None:
        return redirect("accounts:settings")  # which offers to create a first team
    query = request.GET.get("q", "").strip()[:100]
    context = {
        "agents": selectors.agent_list_for_team(team=request.team, query=query),
        "query": query,
        "has_agents": request.team.agents.exists(),
    }
    template = "agents/agent_list.html#agent_results" if is_partial(request) else "agents/agent_list.html"
    return render(request, template, context)


def _render_editor(request: AuthedRequest, editor: AgentEditor, agent: Agent | None) -> HttpResponse:
    context = {"editor": editor, "form": editor.form, "agent": agent, "kind": editor.kind, "mask": MASK}
    template = "agents/agent_form.html#agent_form" if is_partial(request) else "agents/agent_form.html"
    return render(request, template, context)


@login_required
@require_http_methods(["GET", "POST"])
def agent_create(request: AuthedRequest) -> HttpResponse:
    if request.team is None:
        return redirect("accounts:settings")
    if request.method == "GET":
        kind = request.GET.get("kind") if request.GET.get("kind") in Agent.Kind.values else Agent.Kind.LLM
        return _render_editor(request, AgentEditor(initial={"kind": kind}), None)
    editor = AgentEditor(request.POST)
    if editor.is_valid():
        data = editor.form.cleaned_data
        try:
            agent = services.agent_create(
                team=request.team,
                user=request.user,
                name=data["name"],
                kind=data["kind"],
                description=data["description"],
                **editor.config(),
            )
        except ValidationError as error:
            editor.form.add_error(None, error)
        else:
            messages.success(request, f"Agent “{agent.name}” created. Next: add a dataset of test cases.")
            return navigate(request, reverse("agents:detail", args=[agent.pk]))
    return _render_editor(request, editor, None)


# ---- one agent -----------------------------------------------------------------


@login_required
@require_GET
def agent_detail(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    context = {
        "agent": agent,
        "version": agent.current_version,
        "display": _config_display(agent.current_version),
        "evals": selectors.agent_eval_summary(agent=agent),
        "mask": MASK,
    }
    return render(request, "agents/agent_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def agent_edit(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    current = services.version_config(agent.current_version)
    if request.method == "GET":
        # Tools and headers have their own formsets; header values never enter a form's initial data.
        fields = {key: value for key, value in current.items() if key not in ("tools", "http_headers")}
        initial = {"name": agent.name, "description": agent.description, **fields}
        editor = AgentEditor(kind=agent.kind, initial=initial, tools=current["tools"], headers=current["http_headers"])
        return _render_editor(request, editor, agent)
    editor = AgentEditor(request.POST, kind=agent.kind, tools=current["tools"], headers=current["http_headers"])
    if editor.is_valid():
        data = editor.form.cleaned_data
        before = agent.current_version_id
        try:
            agent = services.agent_update(
                agent=agent,
                user=request.user,
                note=data["note"],
                name=data["name"],
                description=data["description"],
                **editor.config(),
            )
        except ValidationError as error:
            editor.form.add_error(None, error)
        else:
            if agent.current_version_id != before:
                # A saved agent always has a current version; the field itself is nullable.
                messages.success(request, f"Saved as version {agent.current_version.number}.")  # type: ignore[union-attr]
            else:
                messages.info(request, "Saved. The configuration did not change, so no new version was made.")
            return navigate(request, reverse("agents:detail", args=[agent.pk]))
    return _render_editor(request, editor, agent)


@login_required
@require_http_methods(["GET", "POST"])
def agent_delete(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    error = None
    if request.method == "POST":
        try:
            services.agent_delete(agent=agent)
        except ValidationError as refused:
            error = " ".join(refused.messages)
        else:
            messages.success(request, f"Agent “{agent.name}” deleted.")
            return navigate(request, reverse("agents:list"))
    context = {"agent": agent, "evals": selectors.agent_eval_summary(agent=agent), "error": error}
    # htmx: the confirmation arrives as a dialog in the page's #dialog-slot.
    if is_partial(request):
        return render(request, "agents/partials/agent_delete_dialog.html", context)
    return render(request, "agents/agent_delete.html", context)


# ---- versions ------------------------------------------------------------------


def _compare_pair(
    request: AuthedRequest, versions: list[AgentVersion]
) -> tuple[AgentVersion | None, AgentVersion | None]:
    """The versions picked as ?a= and ?b=, by default the previous and the current one."""
    by_id = {str(version.pk): version for version in versions}
    default_b = versions[0] if versions else None
    default_a = versions[1] if len(versions) > 1 else None
    return by_id.get(request.GET.get("a", ""), default_a), by_id.get(request.GET.get("b", ""), default_b)


@login_required
@require_GET
def agent_versions(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    versions = list(selectors.agent_version_list(agent=agent))
    a, b = _compare_pair(request, versions)
    context: dict[str, Any] = {
        "agent": agent,
        "versions": versions,
        "a": a,
        "b": b,
        "diff": version_diff(a, b) if a and b else None,
    }
    template = "agents/agent_versions.html#compare" if is_partial(request) else "agents/agent_versions.html"
    return render(request, template, context)


@login_required
@require_GET
def version_detail(request: AuthedRequest, agent_id: int, version_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    version = selectors.agent_version_get(agent=agent, version_id=version_id)
    context = {"agent": agent, "version": version, "display": _config_display(version), "mask": MASK}
    return render(request, "agents/version_detail.html", context)


@login_required
@require_POST
def version_rollback(request: AuthedRequest, agent_id: int, version_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    version = selectors.agent_version_get(agent=agent, version_id=version_id)
    url = reverse("agents:versions", args=[agent.pk])
    try:
        agent = services.agent_rollback(agent=agent, version=version, user=request.user)
    except ValidationError as error:
        if request.htmx:  # stay on the page (204: nothing to swap) and say why
            return trigger_client_event(
                HttpResponse(status=204), "toast", {"message": " ".join(error.messages), "level": "error"}
            )
        messages.error(request, " ".join(error.messages))
        return redirect(url)
    # agent_rollback always leaves a current version; the field itself is nullable.
    number = agent.current_version.number  # type: ignore[union-attr]
    messages.success(request, f"Rolled back to version {version.number}: saved as version {number}.")
    return navigate(request, url)
