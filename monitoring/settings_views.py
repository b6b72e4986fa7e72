"""Settings → Monitoring: the team's ingestion keys (a new key shown once), which service is which
agent, how long traces are kept, and each agent's personal-data masking. Everyone in the team sees
it; only owners change it, as with the team's other settings (accounts/views.py)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Membership, Team
from agents.models import Agent
from evalsite.http import AuthedRequest
from monitoring import services
from monitoring.models import (
    DEFAULT_RETENTION_DAYS,
    AgentMonitoring,
    IngestionKey,
    ServiceMapping,
    TeamMonitoring,
    Trace,
)
from monitoring.settings_forms import IngestionKeyForm, MaskingForm, RetentionForm, ServiceMappingForm

OWNERS_ONLY = "Only team owners can change the monitoring settings."


def _is_owner(request: AuthedRequest, team: Team) -> bool:
    return Membership.objects.filter(team=team, user=request.user, role=Membership.Role.OWNER).exists()


def _get_team_for_owner(request: AuthedRequest) -> Team:
    if request.team is None:
        raise Http404("No current team")
    if not _is_owner(request, request.team):
        raise PermissionDenied(OWNERS_ONLY)
    return request.team


def _context(request: AuthedRequest, team: Team, **overrides: Any) -> dict[str, Any]:
    agents = list(Agent.objects.filter(team=team).order_by("name"))
    masking_off = set(
        AgentMonitoring.objects.filter(agent__team=team, mask_personal_data=False).values_list("agent_id", flat=True)
    )
    retention = TeamMonitoring.objects.filter(team=team).values_list("retention_days", flat=True).first()
    unmapped = (
        Trace.objects.filter(team=team, agent__isnull=True)
        .exclude(service_name="")
        .values_list("service_name", flat=True)
        .distinct()
        .order_by("service_name")[:20]
    )
    return {
        "team": team,
        "is_owner": _is_owner(request, team),
        "keys": IngestionKey.objects.filter(team=team).order_by("revoked_at", "-created_at"),
        "mappings": ServiceMapping.objects.filter(team=team).select_related("agent"),
        "agents": [{"agent": agent, "masking": agent.pk not in masking_off} for agent in agents],
        "unmapped_services": list(unmapped),
        "retention_days": retention or DEFAULT_RETENTION_DAYS,
        "endpoint": request.build_absolute_uri("/v1/traces"),
        "key_form": IngestionKeyForm(),
        "mapping_form": ServiceMappingForm(team=team),
        "retention_form": RetentionForm(initial={"retention_days": retention or DEFAULT_RETENTION_DAYS}),
        **overrides,
    }


def _page(request: AuthedRequest, team: Team, status: int = 200, **overrides: Any) -> HttpResponse:
    return render(request, "monitoring/settings/page.html", _context(request, team, **overrides), status=status)


def _back(request: AuthedRequest, section: str, message: str) -> HttpResponse:
    messages.success(request, message)
    return redirect(reverse("monitoring_settings:page") + f"#{section}")


@login_required
@require_GET
def settings_page(request: AuthedRequest) -> HttpResponse:
    if request.team is None:
        return redirect("accounts:settings")
    return _page(request, request.team)


@login_required
@require_POST
def key_create(request: AuthedRequest) -> HttpResponse:
    team = _get_team_for_owner(request)
    form = IngestionKeyForm(request.POST)
    if not form.is_valid():
        return _page(request, team, status=422, key_form=form)
    key, raw = services.ingestion_key_create(team=team, user=request.user, name=form.cleaned_data["name"])
    # The raw key is in this response only; it is stored hashed and never shown again.
    return _page(request, team, new_key=raw, new_key_obj=key)


@login_required
@require_POST
def key_revoke(request: AuthedRequest, key_id: int) -> HttpResponse:
    team = _get_team_for_owner(request)
    key = services.ingestion_key_revoke(key=get_object_or_404(IngestionKey, team=team, pk=key_id))
    return _back(request, "keys", f"Key “{key.name}” revoked. Apps sending with it now get 401.")


@login_required
@require_POST
def mapping_create(request: AuthedRequest) -> HttpResponse:
    team = _get_team_for_owner(request)
    form = ServiceMappingForm(request.POST, team=team)
    if not form.is_valid():
        return _page(request, team, status=422, mapping_form=form)
    data = form.cleaned_data
    try:
        mapping = services.service_mapping_create(team=team, service_name=data["service_name"], agent=data["agent"])
    except ValidationError as error:
        form.add_error(None, error)
        return _page(request, team, status=422, mapping_form=form)
    return _back(request, "services", f"Traces of “{mapping.service_name}” now go to {mapping.agent.name}.")


@login_required
@require_POST
def mapping_delete(request: AuthedRequest, mapping_id: int) -> HttpResponse:
    team = _get_team_for_owner(request)
    mapping = get_object_or_404(ServiceMapping, team=team, pk=mapping_id)
    services.service_mapping_delete(mapping=mapping)
    return _back(request, "services", f"“{mapping.service_name}” no longer maps to an agent.")


@login_required
@require_POST
def retention_update(request: AuthedRequest) -> HttpResponse:
    team = _get_team_for_owner(request)
    form = RetentionForm(request.POST)
    if not form.is_valid():
        return _page(request, team, status=422, retention_form=form)
    services.team_monitoring_update(team=team, retention_days=form.cleaned_data["retention_days"])
    return _back(request, "retention", f"Traces are kept {form.cleaned_data['retention_days']} days.")


@login_required
@require_POST
def masking_update(request: AuthedRequest, agent_id: int) -> HttpResponse:
    team = _get_team_for_owner(request)
    agent = get_object_or_404(Agent, team=team, pk=agent_id)
    form = MaskingForm(request.POST)
    form.is_valid()  # a checkbox: absent is off
    on = bool(form.cleaned_data.get("mask_personal_data"))
    services.agent_monitoring_update(agent=agent, mask_personal_data=on)
    state = "masked" if on else "stored as sent (masking off)"
    return _back(request, "masking", f"Personal data in {agent.name}'s new traces is {state}.")
