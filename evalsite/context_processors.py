from typing import Any

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
        # A callable, so only pages that show the banner (base.html) pay for the query.
        "no_model_banner": lambda: not llm.is_configured("llm") and not _dismissed(user, "no_model"),
    }


def _dismissed(user: Any, banner: str) -> bool:
    from accounts.models import BannerDismissal

    return BannerDismissal.objects.filter(user=user, banner=banner).exists()
