"""Every write to agents and their versions.

An AgentVersion is an immutable snapshot: runs pin one, so editing an agent never
changes what an earlier run measured. Saving a changed configuration makes a new
version and points the agent at it; saving an unchanged one makes nothing.
"""

import re
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.db.models import Max

from accounts.models import Team
from agents.hooks import before_agent_delete_notify
from agents.models import Agent, AgentVersion

CONFIG_DEFAULTS: dict[str, Any] = {
    "instructions": "",
    "skills": "",
    "knowledge": "",
    "guardrails": "",
    "model": "",
    "temperature": None,
    "tools": [],
    "llm_timeout": None,
    "http_url": "",
    "http_headers": {},
    "http_timeout": 30,
}
# The fields each kind uses; the forms show and save only these.
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    Agent.Kind.LLM: (
        "instructions",
        "skills",
        "knowledge",
        "guardrails",
        "model",
        "temperature",
        "tools",
        "llm_timeout",
    ),
    Agent.Kind.HTTP: ("http_url", "http_headers", "http_timeout"),
    Agent.Kind.KNOWLEDGE: ("instructions", "knowledge"),
}
# Fields a kind keeps only to describe the agent to "Generate with AI": an HTTP agent's endpoint
# never receives them, so they are not in KIND_FIELDS (what the agent's answers use).
GENERATION_ONLY_FIELDS: dict[str, tuple[str, ...]] = {Agent.Kind.HTTP: ("instructions", "knowledge")}
HTTP_TIMEOUT_MAX = 300
LLM_TIMEOUT_MAX = 600


def kind_form_fields(kind: str) -> tuple[str, ...]:
    """The fields the agent form shows and saves for a kind."""
    return KIND_FIELDS[kind] + GENERATION_ONLY_FIELDS.get(kind, ())


TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# RFC 9110 token characters.
HEADER_NAME_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")


# ---- validation ----------------------------------------------------------------


def tools_clean(tools: Any) -> list[dict[str, Any]]:
    """Normalise tool definitions to [{name, description, parameters, result}] or raise."""
    if not isinstance(tools, list):
        raise ValidationError({"tools": "Tools must be a list of tool definitions."})
    cleaned: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, tool in enumerate(tools, start=1):
        if not isinstance(tool, dict):
            raise ValidationError({"tools": f"Tool {position} must be an object with a name."})
        name = str(tool.get("name") or "").strip()
        if not TOOL_NAME_RE.match(name):
            raise ValidationError(
                {"tools": f"Tool {position}: the name must be 1-64 letters, digits, _ or - (got “{name}”)."}
            )
        if name in seen:
            raise ValidationError({"tools": f"Two tools are called “{name}”. Tool names must be unique."})
        seen.add(name)
        parameters = tool.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            raise ValidationError(
                {"tools": f'Tool “{name}”: parameters must be a JSON schema object with "type": "object".'}
            )
        result = tool.get("result", "")
        cleaned.append(
            {
                "name": name,
                "description": str(tool.get("description") or "").strip(),
                "parameters": parameters,
                "result": result if isinstance(result, str) else str(result),
            }
        )
    return cleaned


def _headers_clean(headers: Any) -> dict[str, str]:
    if not isinstance(headers, dict):
        raise ValidationError({"http_headers": "Headers must be a mapping of names to values."})
    for name, value in headers.items():
        if not HEADER_NAME_RE.match(str(name)):
            raise ValidationError({"http_headers": f"“{name}” is not a valid header name."})
        # A CR or LF in a value would let it smuggle extra headers into the request.
        if not isinstance(value, str) or "\r" in value or "\n" in value:
            raise ValidationError({"http_headers": f"The value of {name} must be one line of text."})
    return {str(name): value for name, value in headers.items()}


def _config_clean(*, kind: str, config: dict[str, Any]) -> dict[str, Any]:
    config = {**config, "tools": tools_clean(config["tools"]), "http_headers": _headers_clean(config["http_headers"])}
    temperature = config["temperature"]
    if temperature is not None and not 0 <= float(temperature) <= 2:
        raise ValidationError({"temperature": "Temperature must be between 0 and 2."})
    if not 1 <= int(config["http_timeout"]) <= HTTP_TIMEOUT_MAX:
        raise ValidationError({"http_timeout": f"The timeout must be between 1 and {HTTP_TIMEOUT_MAX} seconds."})
    llm_timeout = config["llm_timeout"]
    if llm_timeout is not None and not 1 <= int(llm_timeout) <= LLM_TIMEOUT_MAX:
        raise ValidationError({"llm_timeout": f"The timeout must be between 1 and {LLM_TIMEOUT_MAX} seconds."})
    if kind == Agent.Kind.HTTP:
        if not config["http_url"]:
            raise ValidationError({"http_url": "An HTTP agent needs the URL of its endpoint."})
        URLValidator(schemes=["http", "https"])(config["http_url"])
    return config


def _name_check(*, team: Team, name: str, exclude_pk: int | None = None) -> str:
    name = name.strip()
    if not name:
        raise ValidationError({"name": "Enter a name."})
    taken = Agent.objects.filter(team=team, name__iexact=name)
    if exclude_pk is not None:
        taken = taken.exclude(pk=exclude_pk)
    if taken.exists():
        raise ValidationError({"name": f"An agent called “{name}” already exists in this team."})
    return name


# ---- versions ------------------------------------------------------------------


def version_config(version: AgentVersion | None) -> dict[str, Any]:
    """The full configuration of a version (header values included: server-side use only)."""
    if version is None:
        return dict(CONFIG_DEFAULTS)
    return {key: getattr(version, key) for key in AgentVersion.STORED_CONFIG_FIELDS}


def _check_config_keys(config: dict[str, Any]) -> None:
    # A misspelt setting is a programming error, not bad input: it must not vanish silently.
    unknown = set(config) - set(AgentVersion.STORED_CONFIG_FIELDS)
    if unknown:
        raise TypeError(f"Unknown agent settings: {', '.join(sorted(unknown))}")


def _version_create(
    *,
    agent: Agent,
    user: User | None,
    note: str,
    config: dict[str, Any],
    rolled_back_from: AgentVersion | None = None,
) -> AgentVersion:
    # Callers hold the agent's row lock, so two saves cannot pick the same number.
    last = agent.versions.aggregate(last=Max("number"))["last"] or 0
    version = AgentVersion.objects.create(
        agent=agent,
        number=last + 1,
        note=note.strip()[:300],
        created_by=user,
        rolled_back_from=rolled_back_from,
        **config,
    )
    agent.current_version = version
    agent.save(update_fields=["current_version", "updated_at"])
    return version


# ---- agents --------------------------------------------------------------------


@transaction.atomic
def agent_create(
    *,
    team: Team,
    user: User | None,
    name: str,
    kind: str,
    description: str = "",
    note: str = "Created",
    **config: Any,
) -> Agent:
    """A new agent with its version 1."""
    if kind not in Agent.Kind.values:
        raise ValidationError({"kind": "Choose LLM, HTTP or knowledge."})
    _check_config_keys(config)
    name = _name_check(team=team, name=name)
    full = _config_clean(kind=kind, config={**CONFIG_DEFAULTS, **config})
    try:
        with transaction.atomic():
            agent = Agent.objects.create(team=team, name=name, kind=kind, description=description.strip())
    except IntegrityError:  # a concurrent create took the name between the check and the insert
        raise ValidationError({"name": f"An agent called “{name}” already exists in this team."}) from None
    _version_create(agent=agent, user=user, note=note, config=full)
    return agent


@transaction.atomic
def agent_update(
    *,
    agent: Agent,
    user: User | None,
    note: str = "",
    name: str | None = None,
    description: str | None = None,
    **config: Any,
) -> Agent:
    """Rename/describe the agent and apply config changes. A changed config becomes a new
    version; an unchanged one creates nothing. Returns the agent, freshly loaded."""
    _check_config_keys(config)
    # Lock the agent: concurrent saves must not both create "version N+1".
    locked = Agent.objects.select_for_update(of=("self",)).select_related("current_version").get(pk=agent.pk)
    if name is not None and name.strip() != locked.name:
        locked.name = _name_check(team=locked.team, name=name, exclude_pk=locked.pk)
        locked.save(update_fields=["name", "updated_at"])
    if description is not None and description.strip() != locked.description:
        locked.description = description.strip()
        locked.save(update_fields=["description", "updated_at"])

    current = version_config(locked.current_version)
    proposed = _config_clean(kind=locked.kind, config={**current, **config})
    if proposed != _comparable(kind=locked.kind, config=current):
        _version_create(agent=locked, user=user, note=note, config=proposed)
    return locked


def _comparable(*, kind: str, config: dict[str, Any]) -> dict[str, Any]:
    """The stored config normalised like a proposed one, so re-saving it is "no change"
    even when it was written by older code or a fixture with a looser tool shape."""
    try:
        return _config_clean(kind=kind, config=config)
    except ValidationError:
        return config


@transaction.atomic
def agent_rollback(*, agent: Agent, version: AgentVersion, user: User | None) -> Agent:
    """Make a new version with the configuration of an older one (history is never rewritten)."""
    locked = Agent.objects.select_for_update(of=("self",)).select_related("current_version").get(pk=agent.pk)
    if version.agent_id != locked.pk:
        raise ValidationError("That version belongs to another agent.")
    if version.pk == locked.current_version_id:
        raise ValidationError(f"Version {version.number} is already the current version.")
    config = version_config(version)
    if _comparable(kind=locked.kind, config=config) == _comparable(
        kind=locked.kind, config=version_config(locked.current_version)
    ):
        raise ValidationError(
            f"The current version already has the configuration of version {version.number}; nothing to roll back."
        )
    _version_create(
        agent=locked, user=user, note=f"Rolled back to v{version.number}", config=config, rolled_back_from=version
    )
    return locked


@transaction.atomic
def agent_delete(*, agent: Agent) -> None:
    """Delete the agent with its versions, datasets and runs.

    Refused while a run is in progress or a dataset is still being extracted: their
    workers would fail half-way on missing rows. Those checks, and the clean-up of the
    runs and the documents' files, belong to datasets and runs: their hooks (agents/hooks.py).
    """
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    before_agent_delete_notify(locked)
    # The agent points at its current version with PROTECT: release it first.
    locked.current_version = None
    locked.save(update_fields=["current_version"])
    locked.delete()
