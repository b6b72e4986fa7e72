"""JSON API for agents and their versions: list, create, read, update, delete, compare two
versions, roll back. What the agent pages do, with the same rules and messages: a request's
JSON is handed to the page's own editor (agents/forms.py AgentEditor) and the same services.

Another team's agent is a 404, never a 403. Bad input is a 422 whose `detail` lists
{loc, msg, type} per message (tools at ["body", "payload", "tools", <index>, <field>]).
A refusal by a rule (a run in progress, nothing to roll back) is a 409 with `detail`.
"""

import json
from typing import Annotated, Any

from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import Http404
from ninja import Query, Router, Status
from ninja.errors import ValidationError as NinjaValidationError
from ninja.pagination import paginate

from accounts.models import Team
from agents import selectors, services
from agents.api_schemas import AgentIn, AgentOut, AgentPatch, VersionDiffOut, VersionOut
from agents.diff import version_diff
from agents.forms import AgentEditor
from agents.models import Agent, AgentVersion
from evalsite.api_errors import (
    BODY,
    DetailOut,
    ValidationErrorOut,
    field_invalid,
    form_error_entries,
    refusal,
    service_invalid,
)
from evalsite.http import ApiRequest
from evalsite.idempotency import idempotency_header, idempotent_create
from evalsite.paging import BoundedLimitOffsetPagination
from evalsite.schemas import Id

router = Router(tags=["agents"])

# The editor's plain fields; tools and headers are its two formsets.
SETTINGS: tuple[str, ...] = ("instructions", "skills", "knowledge", "guardrails", "model", "temperature")
SETTINGS += ("llm_timeout", "http_url", "http_timeout")
# Settings where null means something (the default), not "leave as is".
NULL_MEANS_DEFAULT = ("temperature", "llm_timeout", "http_timeout")
AGENT = "/agents/{agent_id}"
VERSIONS = AGENT + "/versions"


# ---- helpers ---------------------------------------------------------------------------


def _agent(request: ApiRequest, agent_id: int) -> Agent:
    return selectors.agent_get_for_user(user=request.user, agent_id=agent_id)


def _team(request: ApiRequest, team_id: int | None) -> Team:
    """The team to create in: the one named (404 when not the user's), or the user's only team."""
    teams = Team.objects.filter(memberships__user=request.user).order_by("pk")
    if team_id is not None:
        team = teams.filter(pk=team_id).first()
        if team is None:
            raise Http404("No such team")
        return team
    mine = list(teams[:2])
    if len(mine) != 1:
        message = "Choose a team (its id): you are in several." if mine else "Create a team first."
        raise field_invalid("team", message)
    return mine[0]


def _check_kind(kind: str, sent: dict[str, Any]) -> None:
    """A setting the kind does not use is refused, not dropped without a word."""
    label = dict(Agent.Kind.choices)[kind]
    errors = [
        {"type": "value_error", "loc": [*BODY, name], "msg": f"An agent of kind “{label}” has no setting {name}."}
        for name, value in sent.items()
        if name in (*SETTINGS, "tools", "http_headers")
        and value is not None
        and name not in services.kind_form_fields(kind)
    ]
    if errors:
        raise NinjaValidationError(errors)


def _form_data(values: dict[str, Any], tools: list[dict[str, Any]], headers: dict[str, str], stored: dict) -> dict:
    """The POST data the agent page's form would send for these values."""
    data = {name: "" if value is None else str(value) for name, value in values.items()}
    # Every row counts as an initial one: an extra row equal to its initial value would be skipped.
    for prefix, count in (("tools", len(tools)), ("headers", len(headers))):
        data |= {f"{prefix}-TOTAL_FORMS": str(count), f"{prefix}-INITIAL_FORMS": str(count)}
    for index, tool in enumerate(tools):
        parameters = tool.get("parameters")
        data |= {
            f"tools-{index}-name": tool.get("name") or "",
            f"tools-{index}-description": tool.get("description") or "",
            f"tools-{index}-parameters": json.dumps(parameters) if parameters else "",
            f"tools-{index}-result": tool.get("result") or "",
        }
    for index, (name, value) in enumerate(headers.items()):
        existing = "True" if name in stored else ""
        data |= {f"headers-{index}-name": name, f"headers-{index}-value": value, f"headers-{index}-existing": existing}
    return data


def _editor_invalid(editor: AgentEditor) -> NinjaValidationError:
    entries = form_error_entries(editor.form)
    if "tools" in services.kind_form_fields(editor.kind):
        for index, form in enumerate(editor.tool_forms.forms):
            entries += form_error_entries(form, loc=(*BODY, "tools", index))
        entries += [
            {"type": "value_error", "loc": [*BODY, "tools"], "msg": m} for m in editor.tool_forms.non_form_errors()
        ]
    if "http_headers" in services.kind_form_fields(editor.kind):
        for form in editor.header_forms.forms:
            name = form.data.get(form.add_prefix("name"), "")
            entries += form_error_entries(form, loc=(*BODY, "http_headers", name))
        entries += [
            {"type": "value_error", "loc": [*BODY, "http_headers"], "msg": m}
            for m in editor.header_forms.non_form_errors()
        ]
    return NinjaValidationError(entries)


def _validated(editor: AgentEditor) -> AgentEditor:
    if not editor.is_valid():
        raise _editor_invalid(editor)
    return editor


# ---- agents ----------------------------------------------------------------------------


@router.get("/agents", response=list[AgentOut], url_name="agents_list", summary="List your teams' agents")
@paginate(BoundedLimitOffsetPagination)
def agent_list(
    request: ApiRequest,
    team: Annotated[Id | None, Query(None, description="Only this team's agents (id)")] = None,
    q: str = Query("", description="Only agents whose name or description contains this"),
) -> Any:
    agents = selectors.agent_list(user=request.user).order_by("-updated_at", "name", "pk")
    if team is not None:
        agents = agents.filter(team_id=team)
    query = q.strip()[:100]
    if query:
        agents = agents.filter(Q(name__icontains=query) | Q(description__icontains=query))
    return agents


@router.post(
    "/agents",
    response={200: AgentOut, 201: AgentOut, 404: DetailOut, 409: DetailOut, 422: ValidationErrorOut},
    url_name="agents_create",
    summary="Create an agent (its version 1)",
)
def agent_create(request: ApiRequest, payload: AgentIn, idempotency_key: str = idempotency_header()) -> Status[Agent]:
    """As the New agent page: the kind's settings only, validated as the page validates them.
    The same Idempotency-Key answers 200 with the agent the first request made."""
    team = _team(request, payload.team)
    sent = payload.model_dump(exclude_unset=True)
    _check_kind(payload.kind, sent)
    values = {name: getattr(payload, name) for name in ("name", "description", "kind", *SETTINGS)}
    tools = [tool.model_dump() for tool in payload.tools or []]
    editor = _validated(AgentEditor(_form_data(values, tools, payload.http_headers or {}, {})))
    data = editor.form.cleaned_data

    def create() -> Agent:
        return services.agent_create(
            team=team,
            user=request.user,
            name=data["name"],
            kind=data["kind"],
            description=data["description"],
            **editor.config(),
        )

    try:
        agent, replayed = idempotent_create(
            user=request.user,
            operation="agents_create",
            key=idempotency_key,
            body={**sent, "team": team.pk},
            create=create,
            load=lambda pk: selectors.agent_list(user=request.user).filter(pk=pk).first(),
        )
    except ValidationError as error:
        raise service_invalid(error) from None
    return Status(200 if replayed else 201, _agent(request, agent.pk))


@router.get(AGENT, response={200: AgentOut, 404: DetailOut}, url_name="agents_detail", summary="An agent")
def agent_detail(request: ApiRequest, agent_id: int) -> Agent:
    return _agent(request, agent_id)


@router.patch(
    AGENT,
    response={200: AgentOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="agents_edit",
    summary="Rename an agent or change its configuration",
)
def agent_update(request: ApiRequest, agent_id: int, payload: AgentPatch) -> Agent:
    """As the Edit page: a changed configuration is saved as a new version (with `note`),
    an unchanged one makes none. Settings left out keep their value."""
    agent = _agent(request, agent_id)
    sent = payload.model_dump(exclude_unset=True)
    _check_kind(agent.kind, sent)
    current = services.version_config(agent.current_version)
    values: dict[str, Any] = {"name": agent.name, "description": agent.description, "note": ""}
    values |= {name: current[name] for name in SETTINGS}
    values |= {k: v for k, v in sent.items() if k in values and (v is not None or k in NULL_MEANS_DEFAULT)}
    tools = sent["tools"] if sent.get("tools") is not None else current["tools"]
    headers = sent.get("http_headers")
    if headers is None:  # left out: keep every stored header (an empty value keeps a stored one)
        headers = dict.fromkeys(current["http_headers"], "")
    stored = current["http_headers"]
    data = _form_data(values, tools, headers, stored)
    editor = _validated(AgentEditor(data, kind=agent.kind, tools=current["tools"], headers=stored))
    cleaned = editor.form.cleaned_data
    try:
        services.agent_update(
            agent=agent,
            user=request.user,
            note=cleaned["note"],
            name=cleaned["name"],
            description=cleaned["description"],
            **editor.config(),
        )
    except ValidationError as error:
        raise service_invalid(error) from None
    return _agent(request, agent_id)


@router.delete(
    AGENT,
    response={204: None, 404: DetailOut, 409: DetailOut},
    url_name="agents_delete",
    summary="Delete an agent with its versions, datasets and runs",
)
def agent_delete(request: ApiRequest, agent_id: int) -> Status[Any]:
    """409 while one of its runs is in progress or a dataset is still being read."""
    try:
        services.agent_delete(agent=_agent(request, agent_id))
    except ValidationError as error:
        return refusal(409, error)
    return Status(204, None)


# ---- versions --------------------------------------------------------------------------


@router.get(
    VERSIONS, response=list[VersionOut], url_name="agents_versions", summary="An agent's versions, newest first"
)
@paginate(BoundedLimitOffsetPagination)
def version_list(request: ApiRequest, agent_id: int) -> Any:
    return selectors.agent_version_list(agent=_agent(request, agent_id)).select_related("agent")


@router.get(
    VERSIONS + "/diff",
    response={200: VersionDiffOut, 404: DetailOut},
    url_name="agents_version_diff",
    summary="What changed between two versions, field by field (as the versions page shows it)",
)
def version_compare(
    request: ApiRequest,
    agent_id: int,
    a: Annotated[
        Id | None, Query(None, description="From: a version id; by default the one before the current")
    ] = None,
    b: Annotated[Id | None, Query(None, description="To: a version id; by default the current version")] = None,
) -> dict[str, Any]:
    """Unified line diffs per field; header values are masked, a changed one is marked."""
    agent = _agent(request, agent_id)
    versions = list(selectors.agent_version_list(agent=agent))
    by_id = {version.pk: version for version in versions}
    if (a is not None and a not in by_id) or (b is not None and b not in by_id) or not versions:
        raise Http404("No such version")
    to = by_id[b] if b is not None else versions[0]
    since = by_id[a] if a is not None else (versions[1] if len(versions) > 1 else None)
    fields = version_diff(since, to) if since is not None and since.pk != to.pk else []
    return {
        "a": since,
        "b": to,
        "fields": [
            {"field": f.field, "label": f.label, "added": f.added, "removed": f.removed, "lines": f.lines}
            for f in fields
        ],
    }


@router.get(
    VERSIONS + "/{version_id}",
    response={200: VersionOut, 404: DetailOut},
    url_name="agents_version_detail",
    summary="One version of an agent",
)
def version_detail(request: ApiRequest, agent_id: int, version_id: int) -> AgentVersion:
    agent = _agent(request, agent_id)
    version = selectors.agent_version_get(agent=agent, version_id=version_id)
    version.agent = agent
    return version


@router.post(
    VERSIONS + "/{version_id}/rollback",
    response={200: VersionOut, 201: VersionOut, 404: DetailOut, 409: DetailOut, 422: ValidationErrorOut},
    url_name="agents_version_rollback",
    summary="Roll back: save an older version's configuration as a new current version",
)
def version_rollback(
    request: ApiRequest, agent_id: int, version_id: int, idempotency_key: str = idempotency_header()
) -> Status[Any]:
    """201 with the new version. Nothing is deleted. 409 when the version is the current one
    or has the current configuration. The same Idempotency-Key answers 200 with the first
    rollback's version."""
    agent = _agent(request, agent_id)
    version = selectors.agent_version_get(agent=agent, version_id=version_id)

    def rollback() -> AgentVersion:
        rolled = services.agent_rollback(agent=agent, version=version, user=request.user)
        assert rolled.current_version is not None  # a rollback always leaves one
        return rolled.current_version

    try:
        made, replayed = idempotent_create(
            user=request.user,
            operation=f"agents_version_rollback:{agent.pk}:{version.pk}",
            key=idempotency_key,
            body={},
            create=rollback,
            load=lambda pk: agent.versions.filter(pk=pk).first(),
        )
    except ValidationError as error:
        return refusal(409, error)
    return Status(200 if replayed else 201, version_detail(request, agent_id, made.pk))
