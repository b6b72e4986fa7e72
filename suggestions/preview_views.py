"""Apply's preview with a model (suggestions/preview.py): start it from the review step, poll it."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from evalsite.http import AuthedRequest
from suggestions.forms import ApplyConfirmForm
from suggestions.models import PreviewJob
from suggestions.preview import preview_lost, preview_start
from suggestions.views import _get_run_for_user

TEMPLATE = "suggestions/partials/preview.html"


@login_required
@require_POST
def apply_preview(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """The review step's texts, answered by the changed agent on the cases they reach."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    form = ApplyConfirmForm(request.POST, run=run)
    if not form.is_valid():
        return render(request, TEMPLATE, {"agent": agent, "run": run, "error": "Reload the dialog and try again."})
    try:
        job = preview_start(
            run=run,
            user=request.user,
            base=form.cleaned_data["base_version"],
            texts=form.texts(),
            suggestions=list(form.cleaned_data["suggestions"]),
        )
    except ValidationError as error:
        return render(request, TEMPLATE, {"agent": agent, "run": run, "error": " ".join(error.messages)})
    return render(request, TEMPLATE, _context(agent, run, job))


@login_required
@require_GET
def apply_preview_job(request: AuthedRequest, agent_id: int, run_id: int, preview_id: int) -> HttpResponse:
    """The preview as it goes (polled every 3 s); 286 once it has settled, so polling stops."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    job = get_object_or_404(PreviewJob, pk=preview_id, run=run)
    context = _context(agent, run, job)
    status = 200 if context["polling"] else HTMX_STOP_POLLING
    return render(request, TEMPLATE, context, status=status if request.htmx else 200)


def _context(agent: object, run: object, job: PreviewJob) -> dict[str, object]:
    lost = preview_lost(job)
    rows = [{**row, "changed": row["before"] != row["status"]} for row in job.results]
    return {
        "agent": agent,
        "run": run,
        "job": job,
        "rows": rows,
        "lost": lost,
        "polling": job.is_active and not lost,
        "breaks": sum(1 for row in rows if row["before"] == "pass" and row["status"] != "pass"),
        "fixes": sum(1 for row in rows if row["before"] != "pass" and row["status"] == "pass"),
        "cost": sum(row.get("cost") or 0.0 for row in rows),
    }
