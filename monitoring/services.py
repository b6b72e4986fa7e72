"""The team's monitoring settings (Settings → Monitoring): ingestion keys, service mappings, the
retention of traces and each agent's masking switch. Owners only: the views and the API check the
role (as accounts' team settings do); these services check that what they join is the team's."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Team
from agents.models import Agent
from monitoring.models import AgentMonitoring, IngestionKey, ServiceMapping, TeamMonitoring

MAX_RETENTION_DAYS = 3650


def ingestion_key_create(*, team: Team, user: User | None, name: str) -> tuple[IngestionKey, str]:
    """A new key and its raw value. The raw value is returned once and never stored."""
    name = name.strip()
    if not name:
        raise ValidationError({"name": "Give the key a name, e.g. the app that will send traces."})
    raw = IngestionKey.generate_raw()
    key = IngestionKey.objects.create(
        team=team,
        name=name[:100],
        hint=raw[: len(IngestionKey.PREFIX) + 4],
        key_hash=IngestionKey.hash(raw),
        created_by=user,
    )
    return key, raw


def ingestion_key_revoke(*, key: IngestionKey) -> IngestionKey:
    # Conditional update: revoking twice keeps the first revocation time.
    IngestionKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    key.refresh_from_db(fields=["revoked_at"])
    return key


def service_mapping_create(*, team: Team, service_name: str, agent: Agent) -> ServiceMapping:
    """Traces of `service_name` belong to `agent` from now on (earlier ones keep theirs)."""
    service_name = service_name.strip()
    if not service_name:
        raise ValidationError({"service_name": "Write the service.name your app sends."})
    if agent.team_id != team.pk:
        raise ValidationError({"agent": "Choose one of the team's agents."})
    try:
        with transaction.atomic():
            return ServiceMapping.objects.create(team=team, service_name=service_name[:200], agent=agent)
    except IntegrityError:
        raise ValidationError(
            {"service_name": f"“{service_name}” already maps to an agent. Remove that mapping first."}
        ) from None


def service_mapping_delete(*, mapping: ServiceMapping) -> None:
    mapping.delete()


def team_monitoring_update(*, team: Team, retention_days: int) -> TeamMonitoring:
    """How many days traces are kept (the retention job deletes older ones)."""
    if not 1 <= retention_days <= MAX_RETENTION_DAYS:
        raise ValidationError({"retention_days": f"Keep traces between 1 and {MAX_RETENTION_DAYS} days."})
    settings, _ = TeamMonitoring.objects.update_or_create(team=team, defaults={"retention_days": retention_days})
    return settings


def agent_monitoring_update(*, agent: Agent, mask_personal_data: bool) -> AgentMonitoring:
    """Turn the personal-data masking of the agent's traces on or off (for traces stored from now on)."""
    settings, _ = AgentMonitoring.objects.update_or_create(
        agent=agent, defaults={"mask_personal_data": mask_personal_data}
    )
    return settings
