from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from accounts.models import Team

SESSION_KEY = "current_team_id"


def _current_team(request: HttpRequest) -> Team | None:
    if not request.user.is_authenticated:
        return None
    teams = Team.objects.filter(memberships__user=request.user)
    team = teams.filter(pk=request.session.get(SESSION_KEY)).first() or teams.order_by("pk").first()
    if team and request.session.get(SESSION_KEY) != team.pk:
        request.session[SESSION_KEY] = team.pk
    return team


class CurrentTeamMiddleware:
    """Sets request.team, the team whose objects the lists show (switched in the header)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.team = _current_team(request)  # type: ignore[attr-defined]
        return self.get_response(request)
