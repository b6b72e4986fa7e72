from typing import Any

from django.core.cache import cache
from django.http import HttpRequest

from evalsite import llm, workers


def _worker_running() -> bool:
    # Called by the template only where the banner is drawn (full pages), and shared across
    # processes for a few seconds, so page polls cost no query for it.
    return bool(cache.get_or_set("evalsite:worker-running", workers.worker_running, 5))


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
        # Callables, so only pages that show the banners (base.html) pay for their queries.
        "no_model_banner": lambda: not llm.is_configured("llm") and not _dismissed(user, "no_model"),
        "worker_running": _worker_running,
    }


def _dismissed(user: Any, banner: str) -> bool:
    from accounts.models import BannerDismissal

    return BannerDismissal.objects.filter(user=user, banner=banner).exists()
