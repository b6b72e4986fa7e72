from django.http import HttpRequest

from evalsite import llm


def console(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if not (user and user.is_authenticated):
        return {}
    return {
        # Set by accounts.middleware.CurrentTeamMiddleware; HttpRequest does not declare it.
        "current_team": request.team,  # type: ignore[attr-defined]
        "user_teams": user.teams.order_by("name"),
        "llm_configured": llm.is_configured("llm"),
        "judge_configured": llm.is_configured("judge"),
    }
