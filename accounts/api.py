"""API: who am I, and what the settings page does: teams (create, rename, budgets), members
(add, change role, remove), the user's API tokens (create, revoke) and the model connection test.

The page acts on the session's current team; the API names the team in its path. Another
team is a 404; a member asking for an owner's action is a 403 with the page's message. The
page's forms validate (accounts/forms.py), so a refusal reads the same.
"""

from dataclasses import asdict
from typing import Any

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from ninja import Router, Schema, Status
from ninja.errors import HttpError

from accounts import selectors, services
from accounts.api_schemas import (
    BudgetsIn,
    MemberAddIn,
    MemberOut,
    MemberRoleIn,
    ModelTestOut,
    TeamDetailOut,
    TeamIn,
    TokenCreatedOut,
    TokenIn,
    TokenOut,
)
from accounts.forms import ApiTokenForm, MemberAddForm, MemberCreateForm, MemberRoleForm, TeamBudgetForm, TeamForm
from accounts.models import ApiToken, Membership, Team
from evalsite import llm
from evalsite.api_errors import DetailOut, ValidationErrorOut, form_invalid, refusal, service_invalid
from evalsite.http import ApiRequest
from evalsite.idempotency import idempotency_header, idempotent_create

router = Router(tags=["accounts"])

TEAM = "/teams/{team_id}"
MEMBER = TEAM + "/members/{membership_id}"
OWNERS_ONLY = "Only team owners can manage the team."


class TeamOut(Schema):
    id: int
    name: str
    role: str


class MeOut(Schema):
    username: str
    token_name: str
    teams: list[TeamOut]


@router.get("/me", response=MeOut, summary="The token's user and their teams")
def me(request: ApiRequest) -> dict[str, Any]:
    memberships = Membership.objects.filter(user=request.user).select_related("team").order_by("team__name")
    return {
        "username": request.user.username,
        "token_name": request.auth.name,
        "teams": [{"id": m.team_id, "name": m.team.name, "role": m.role} for m in memberships],
    }


# ---- helpers ---------------------------------------------------------------------------


def _membership(request: ApiRequest, team_id: int) -> Membership:
    """The user's own membership of the team: 404 for a team they are not in."""
    # By the team's pk (an id past the column's range is then no team, not a database error).
    team = get_object_or_404(Team.objects.filter(memberships__user=request.user), pk=team_id)
    return get_object_or_404(Membership.objects.select_related("team"), team=team, user=request.user)


def _owned_team(request: ApiRequest, team_id: int) -> Team:
    mine = _membership(request, team_id)
    if mine.role != Membership.Role.OWNER:
        raise HttpError(403, OWNERS_ONLY)
    return mine.team


def _team_detail(request: ApiRequest, team_id: int) -> dict[str, Any]:
    mine = _membership(request, team_id)
    team = mine.team
    return {
        "id": team.pk,
        "name": team.name,
        "role": mine.role,
        "run_budget": team.run_budget,
        "monthly_budget": team.monthly_budget,
        "created_at": team.created_at,
        "members": list(selectors.membership_list(team=team)),
    }


def _valid(form: Any) -> Any:
    if not form.is_valid():
        raise form_invalid(form)
    return form.cleaned_data


# ---- teams -----------------------------------------------------------------------------


@router.post(
    "/teams",
    response={200: TeamDetailOut, 201: TeamDetailOut, 422: ValidationErrorOut},
    url_name="accounts_team_create",
    summary="Create a team; you are its owner",
)
def team_create(request: ApiRequest, payload: TeamIn, idempotency_key: str = idempotency_header()) -> Status[Any]:
    """The same Idempotency-Key answers 200 with the team the first request made."""
    data = _valid(TeamForm({"name": payload.name}))
    team, replayed = idempotent_create(
        user=request.user,
        operation="accounts_team_create",
        key=idempotency_key,
        body=payload.model_dump(),
        create=lambda: services.team_create(user=request.user, name=data["name"]),
        load=lambda pk: Team.objects.filter(pk=pk, memberships__user=request.user).first(),
    )
    return Status(200 if replayed else 201, _team_detail(request, team.pk))


@router.get(
    TEAM, response={200: TeamDetailOut, 404: DetailOut}, url_name="accounts_settings", summary="A team and its members"
)
def team_detail(request: ApiRequest, team_id: int) -> dict[str, Any]:
    return _team_detail(request, team_id)


@router.patch(
    TEAM,
    response={200: TeamDetailOut, 403: DetailOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="accounts_team_update",
    summary="Rename a team (owners)",
)
def team_update(request: ApiRequest, team_id: int, payload: TeamIn) -> dict[str, Any]:
    team = _owned_team(request, team_id)
    services.team_update(team=team, name=_valid(TeamForm({"name": payload.name}))["name"])
    return _team_detail(request, team_id)


@router.put(
    TEAM + "/budgets",
    response={200: TeamDetailOut, 403: DetailOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="accounts_team_budgets",
    summary="Set a team's default cost cap per run and its monthly budget (owners)",
)
def team_budgets(request: ApiRequest, team_id: int, payload: BudgetsIn) -> dict[str, Any]:
    team = _owned_team(request, team_id)
    raw = {name: "" if value is None else str(value) for name, value in payload.model_dump().items()}
    data = _valid(TeamBudgetForm(raw))
    services.team_budgets_update(team=team, run_budget=data["run_budget"], monthly_budget=data["monthly_budget"])
    return _team_detail(request, team_id)


# ---- members ---------------------------------------------------------------------------


@router.post(
    TEAM + "/members",
    response={200: MemberOut, 201: MemberOut, 403: DetailOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="accounts_member_add",
    summary="Add a user to a team, or create the user and add them (owners)",
)
def member_add(
    request: ApiRequest, team_id: int, payload: MemberAddIn, idempotency_key: str = idempotency_header()
) -> Status[Any]:
    """The same Idempotency-Key answers 200 with the membership the first request made."""
    team = _owned_team(request, team_id)
    new = payload.mode == "new"
    fields = payload.model_dump(exclude={"mode"} if new else {"mode", "email", "password"})
    data = _valid((MemberCreateForm if new else MemberAddForm)(fields))

    def add() -> Membership:
        if new:
            return services.membership_create_user(team=team, **data)
        return services.membership_add(team=team, **data)

    try:
        membership, replayed = idempotent_create(
            user=request.user,
            operation=f"accounts_member_add:{team.pk}",
            key=idempotency_key,
            body=payload.model_dump(),
            create=add,
            load=lambda pk: Membership.objects.select_related("user").filter(pk=pk, team=team).first(),
        )
    except ValidationError as error:
        raise service_invalid(error) from None
    return Status(200 if replayed else 201, membership)


@router.patch(
    MEMBER,
    response={200: MemberOut, 403: DetailOut, 404: DetailOut, 409: DetailOut, 422: ValidationErrorOut},
    url_name="accounts_member_role",
    summary="Make a member an owner or an owner a member (owners)",
)
def member_role(request: ApiRequest, team_id: int, membership_id: int, payload: MemberRoleIn) -> Status[Any]:
    """409 when it would leave the team without an owner."""
    team = _owned_team(request, team_id)
    membership = selectors.membership_get(team=team, membership_id=membership_id)
    data = _valid(MemberRoleForm({"role": payload.role}))
    try:
        services.membership_set_role(membership=membership, role=data["role"])
    except ValidationError as error:
        return refusal(409, error)
    return Status(200, membership)


@router.delete(
    MEMBER,
    response={204: None, 403: DetailOut, 404: DetailOut, 409: DetailOut},
    url_name="accounts_member_remove",
    summary="Remove a member from a team (owners), or leave it (your own membership)",
)
def member_remove(request: ApiRequest, team_id: int, membership_id: int) -> Status[Any]:
    """409 for the team's last owner."""
    team = _membership(request, team_id).team
    membership = selectors.membership_get(team=team, membership_id=membership_id)
    if membership.user_id != request.user.pk:  # anyone may leave; only owners remove others
        _owned_team(request, team_id)
    try:
        services.membership_remove(membership=membership)
    except ValidationError as error:
        return refusal(409, error)
    return Status(204, None)


# ---- API tokens ------------------------------------------------------------------------


@router.get("/tokens", response=list[TokenOut], url_name="accounts_tokens", summary="Your API tokens")
def token_list(request: ApiRequest) -> Any:
    return selectors.api_token_list(user=request.user)


@router.post(
    "/tokens",
    response={200: TokenCreatedOut, 201: TokenCreatedOut, 422: ValidationErrorOut},
    url_name="accounts_token_create",
    summary="Create an API token (its secret is in this answer only)",
)
def token_create(request: ApiRequest, payload: TokenIn, idempotency_key: str = idempotency_header()) -> Status[Any]:
    """The same Idempotency-Key answers 200 with the same token, without its secret."""
    data = _valid(ApiTokenForm({"name": payload.name}))
    secret: dict[str, str] = {}

    def create() -> ApiToken:
        token, secret["raw"] = services.api_token_create(user=request.user, name=data["name"])
        return token

    token, replayed = idempotent_create(
        user=request.user,
        operation="accounts_token_create",
        key=idempotency_key,
        body=payload.model_dump(),
        create=create,
        load=lambda pk: ApiToken.objects.filter(pk=pk, user=request.user).first(),
    )
    token.token = None if replayed else secret["raw"]  # type: ignore[attr-defined]
    return Status(200 if replayed else 201, token)


@router.post(
    "/tokens/{token_id}/revoke",
    response={200: TokenOut, 404: DetailOut},
    url_name="accounts_token_revoke",
    summary="Revoke one of your API tokens: it stops working at once",
)
def token_revoke(request: ApiRequest, token_id: int) -> ApiToken:
    return services.api_token_revoke(token=selectors.api_token_get_for_user(user=request.user, token_id=token_id))


# ---- model connection test ---------------------------------------------------------------


def _model_test() -> dict[str, Any]:
    summary = selectors.model_test_summary()
    models = [
        {**{k: v for k, v in row.items() if k != "test"}, "test": asdict(row["test"]) if row["test"] else None}
        for row in summary["model_tests"]
    ]
    return {"running": summary["model_testing"], "status": summary["model_status"], "models": models}


def _in_a_team(request: ApiRequest) -> None:
    if not Membership.objects.filter(user=request.user).exists():
        raise HttpError(403, "Create a team first.")


@router.post(
    "/model-test",
    response={202: ModelTestOut, 403: DetailOut, 409: DetailOut},
    url_name="accounts_model_test",
    summary="Test the connection to each configured model (a job): poll GET /model-test",
)
def model_test(request: ApiRequest) -> Status[Any]:
    """A few short calls to each model, in a worker. A test already under way is not started twice.
    409 when no model is configured."""
    from evalsite.llm.probe import model_test_start

    _in_a_team(request)
    if not llm.is_configured("llm"):
        return refusal(409, "No model is configured: set EVALSITE_LLM_MODEL.")
    model_test_start()
    return Status(202, _model_test())


@router.get(
    "/model-test",
    response={200: ModelTestOut, 403: DetailOut},
    url_name="accounts_model_test_status",
    summary="The last connection test of each configured model",
)
def model_test_status(request: ApiRequest) -> dict[str, Any]:
    _in_a_team(request)
    return _model_test()
