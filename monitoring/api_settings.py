"""API: what Settings → Monitoring does, for a team named in the path (as accounts' API does):
ingestion keys (list, create — the secret in that answer only —, revoke), service mappings (list,
create, delete), retention, and each agent's personal-data masking. Another team is a 404; a
member asking for an owner's change is a 403 with the page's message. The page's forms validate."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from ninja import Router, Schema, Status
from ninja.errors import HttpError

from accounts.models import Membership, Team
from agents.models import Agent
from evalsite.api_errors import DetailOut, ValidationErrorOut, form_invalid, service_invalid
from evalsite.http import ApiRequest
from evalsite.schemas import Id, StrictSchema
from monitoring import services
from monitoring.models import DEFAULT_RETENTION_DAYS, AgentMonitoring, IngestionKey, ServiceMapping, TeamMonitoring
from monitoring.settings_forms import IngestionKeyForm, RetentionForm, ServiceMappingForm
from monitoring.settings_views import OWNERS_ONLY

router = Router(tags=["monitoring settings"])
TEAM = "/teams/{team_id}/monitoring"


class KeyOut(Schema):
    id: int
    name: str
    hint: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    active: bool

    @staticmethod
    def resolve_active(key: IngestionKey) -> bool:
        return key.is_active


class KeyCreatedOut(KeyOut):
    key: str  # the raw key: in this answer only


class KeyIn(StrictSchema):
    name: str


class ServiceMappingIn(StrictSchema):
    service_name: str
    agent_id: Id


class ServiceMappingOut(Schema):
    id: int
    service_name: str
    agent_id: int


class RetentionIn(StrictSchema):
    retention_days: int


class TeamMonitoringOut(Schema):
    retention_days: int


class MaskingIn(StrictSchema):
    mask_personal_data: bool


class MaskingOut(Schema):
    agent_id: int
    mask_personal_data: bool


def _team(request: ApiRequest, team_id: int, *, owner: bool) -> Team:
    membership = get_object_or_404(Membership.objects.select_related("team"), team_id=team_id, user=request.user)
    if owner and membership.role != Membership.Role.OWNER:
        raise HttpError(403, OWNERS_ONLY)
    return membership.team


@router.get(
    TEAM + "/keys", response=list[KeyOut], url_name="monitoring_settings_keys", summary="The team's ingestion keys"
)
def key_list(request: ApiRequest, team_id: int) -> Any:
    return IngestionKey.objects.filter(team=_team(request, team_id, owner=False)).order_by("revoked_at", "-created_at")


@router.post(
    TEAM + "/keys",
    response={201: KeyCreatedOut, 403: DetailOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="monitoring_settings_key_create",
    summary="Create an ingestion key (its secret is in this answer only)",
)
def key_create(request: ApiRequest, team_id: int, payload: KeyIn) -> Status[Any]:
    team = _team(request, team_id, owner=True)
    form = IngestionKeyForm({"name": payload.name})
    if not form.is_valid():
        raise form_invalid(form)
    key, raw = services.ingestion_key_create(team=team, user=request.user, name=form.cleaned_data["name"])
    key.key = raw  # type: ignore[attr-defined]
    return Status(201, key)


@router.post(
    TEAM + "/keys/{key_id}/revoke",
    response={200: KeyOut, 403: DetailOut, 404: DetailOut},
    url_name="monitoring_settings_key_revoke",
    summary="Revoke an ingestion key: apps sending with it get 401 at once",
)
def key_revoke(request: ApiRequest, team_id: int, key_id: int) -> IngestionKey:
    team = _team(request, team_id, owner=True)
    return services.ingestion_key_revoke(key=get_object_or_404(IngestionKey, team=team, pk=key_id))


@router.get(
    TEAM + "/services",
    response=list[ServiceMappingOut],
    url_name="monitoring_settings_mappings",
    summary="Service → agent",
)
def mapping_list(request: ApiRequest, team_id: int) -> Any:
    return ServiceMapping.objects.filter(team=_team(request, team_id, owner=False))


@router.post(
    TEAM + "/services",
    response={201: ServiceMappingOut, 403: DetailOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="monitoring_settings_mapping_create",
    summary="Map a service name to an agent",
)
def mapping_create(request: ApiRequest, team_id: int, payload: ServiceMappingIn) -> Status[Any]:
    team = _team(request, team_id, owner=True)
    form = ServiceMappingForm({"service_name": payload.service_name, "agent": payload.agent_id}, team=team)
    if not form.is_valid():
        raise form_invalid(form, names={"agent": "agent_id"})
    data = form.cleaned_data
    try:
        mapping = services.service_mapping_create(team=team, service_name=data["service_name"], agent=data["agent"])
    except ValidationError as error:
        raise service_invalid(error, names={"agent": "agent_id"}) from None
    return Status(201, mapping)


@router.delete(
    TEAM + "/services/{mapping_id}",
    response={204: None, 403: DetailOut, 404: DetailOut},
    url_name="monitoring_settings_mapping_delete",
    summary="Remove a service's mapping (its traces stay with their agent)",
)
def mapping_delete(request: ApiRequest, team_id: int, mapping_id: int) -> Status[None]:
    team = _team(request, team_id, owner=True)
    services.service_mapping_delete(mapping=get_object_or_404(ServiceMapping, team=team, pk=mapping_id))
    return Status(204, None)


@router.get(TEAM, response=TeamMonitoringOut, url_name="monitoring_settings_team", summary="Retention of traces")
def team_settings(request: ApiRequest, team_id: int) -> dict[str, int]:
    team = _team(request, team_id, owner=False)
    days = TeamMonitoring.objects.filter(team=team).values_list("retention_days", flat=True).first()
    return {"retention_days": days or DEFAULT_RETENTION_DAYS}


@router.put(
    TEAM + "/retention",
    response={200: TeamMonitoringOut, 403: DetailOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="monitoring_settings_retention_update",
    summary="How many days traces are kept",
)
def retention_update(request: ApiRequest, team_id: int, payload: RetentionIn) -> TeamMonitoring:
    team = _team(request, team_id, owner=True)
    form = RetentionForm({"retention_days": payload.retention_days})
    if not form.is_valid():
        raise form_invalid(form)
    return services.team_monitoring_update(team=team, retention_days=form.cleaned_data["retention_days"])


@router.put(
    "/agents/{agent_id}/monitoring/masking",
    response={200: MaskingOut, 403: DetailOut, 404: DetailOut},
    url_name="monitoring_settings_masking_update",
    summary="Turn the personal-data masking of an agent's new traces on or off (team owners)",
)
def masking_update(request: ApiRequest, agent_id: int, payload: MaskingIn) -> AgentMonitoring:
    agent = get_object_or_404(Agent.objects.filter(team__memberships__user=request.user), pk=agent_id)
    _team(request, agent.team_id, owner=True)
    return services.agent_monitoring_update(agent=agent, mask_personal_data=payload.mask_personal_data)
