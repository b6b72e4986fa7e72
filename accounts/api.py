"""API: who am I? Lets a CLI or a pipeline check its token before doing real work."""

from typing import Any

from ninja import Router, Schema

from accounts.models import Membership
from evalsite.http import ApiRequest

router = Router(tags=["accounts"])


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
