"""Settings → Model → Judge preflight: check the console's judge on the calibration set on demand.

The settings page (accounts) loads this panel from here, since accounts may not import runs.
The preflight is a job (runs/services/preflight.py); the panel polls until it is done.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from evalsite.http import AuthedRequest, is_partial
from runs.judging import configs as judging
from runs.services import preflight


def _panel(request: AuthedRequest) -> HttpResponse:
    config = judging.console_judge_config()
    state = preflight.judge_preflight_state(config=config)
    context = {"judge": config, "judge_state": state}
    if not is_partial(request):
        return render(request, "runs/judge_preflight.html", context)
    status = 200 if state == "running" else HTMX_STOP_POLLING
    return render(request, "runs/partials/judge_preflight_settings.html", context, status=status)


@login_required
@require_GET
def judge_preflight_panel(request: AuthedRequest) -> HttpResponse:
    """The panel (htmx: polled every 3 s while the preflight runs, 286 once done), or its page."""
    return _panel(request)


@login_required
@require_POST
def judge_preflight_start(request: AuthedRequest) -> HttpResponse:
    """Preflight the console's judge again, as a job."""
    config = judging.console_judge_config()
    if config.judge_model:
        preflight.judge_preflight_start(config=config, force=True)
    if not request.htmx:
        return redirect(reverse("judge_preflight:panel"))
    return _panel(request)
