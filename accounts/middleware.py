from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from accounts.models import Team

SESSION_KEY = "current_team_id"


def _current_team(request: HttpRequest) -> Team | None:
    if not request.user.is_authenticated:
        return None
    teams = Team.objects.filter(memberships__user=request.user)
    # No team in the session yet: pk 0 matches no row (ids start at 1), like a stale id does.
    team = teams.filter(pk=request.session.get(SESSION_KEY, 0)).first() or teams.order_by("pk").first()
    if team and request.session.get(SESSION_KEY) != team.pk:
        request.session[SESSION_KEY] = team.pk
    return team


class CurrentTeamMiddleware:
    """Sets request.team, the team whose objects the lists show (switched in the header)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Our own attribute (typed on evalsite.http.AuthedRequest): HttpRequest does not declare it.
        request.team = _current_team(request)  # type: ignore[attr-defined]
        return self.get_response(request)
