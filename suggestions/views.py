"""The run page's "Suggested changes": the panel, the two-step Apply dialog, the change
request of HTTP agents, and Verify. Every view is scoped by agent_get_for_user (404 for outsiders)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HTMX_STOP_POLLING, retarget, trigger_client_event

from agents.diff import LABELS
from agents.models import Agent, AgentVersion
from agents.selectors import agent_get_for_user
from agents.services import KIND_FIELDS
from evalsite import llm
from evalsite.forms import form_messages
from evalsite.http import AuthedRequest, is_partial
from runs.models import Run
from runs.selectors import run_get
from runs.services import run_verify_start
from suggestions import rewrite, selectors, services
from suggestions.affected import change_check
from suggestions.forms import ApplyConfirmForm, ApplyDiffForm, RewriteActionForm, VerifyForm, edit_formset
from suggestions.models import RewriteJob, Suggestion

DIALOG_CONTENT_ID = "apply-dialog-content"
PROGRESS_ID = "apply-progress"  # the rewrite's polling element, inside the dialog's content


def _get_run_for_user(request: AuthedRequest, agent_id: int, run_id: int) -> tuple[Agent, Run]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    return agent, run_get(agent=agent, run_id=run_id)


def _run_url(agent: Agent, run: Run) -> str:
    return reverse("runs:detail", args=[agent.pk, run.pk]) + "?tab=suggestions#suggestions"


def _message(error: ValidationError) -> str:
    return " ".join(error.messages)


def _panel_response(
    request: AuthedRequest, agent: Agent, run: Run, *, toast: tuple[str, str] | None = None
) -> HttpResponse:
    """The panel alone for htmx (286 once nothing is left to poll for), else its own page."""
    panel = selectors.suggestion_panel_get(agent=agent, run=run)
    context = {"agent": agent, "run": run, "panel": panel}
    if not is_partial(request):
        return render(request, "suggestions/panel_page.html", context)
    status = 200 if panel.polling else HTMX_STOP_POLLING
    response = render(request, "suggestions/partials/panel.html#live", context, status=status)
    if toast:
        trigger_client_event(response, "toast", {"message": toast[0], "level": toast[1]})
    return response


def _after_post(request: AuthedRequest, agent: Agent, run: Run, message: str, level: str) -> HttpResponse:
    if request.htmx:
        return _panel_response(request, agent, run, toast=(message, level))
    getattr(messages, level)(request, message)
    return redirect(_run_url(agent, run))


@login_required
@require_GET
def panel(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    agent, run = _get_run_for_user(request, agent_id, run_id)
    return _panel_response(request, agent, run)


@login_required
@require_POST
def generate(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """Queue the suggestion job of a completed run (the "Suggest changes" and "Try again" buttons)."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    try:
        services.suggestion_generation_start(run=run, user=request.user)
    except ValidationError as error:
        return _after_post(request, agent, run, _message(error), "error")
    return _after_post(request, agent, run, "Looking for changes that would fix the failing cases…", "info")


# ---- the Apply dialog -------------------------------------------------------------------


def _proposed(run: Run) -> list[Suggestion]:
    return list(selectors.suggestion_list(run=run).filter(state=Suggestion.State.PROPOSED))


def _dialog_response(
    request: AuthedRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """One step, three callers: the whole dialog (htmx GET from the panel), the step alone
    (htmx posts, Back and the rewrite's polls, swapped into the open dialog) and a plain page
    (no JavaScript). `status` is for htmx only: 286 stops the rewrite's poll."""
    context = {**context, "step_template": template}
    if not is_partial(request):
        return render(request, "suggestions/apply_page.html", context)
    if request.method == "POST" or request.htmx.target in (DIALOG_CONTENT_ID, PROGRESS_ID):
        return render(request, template, context, status=status)
    return render(request, "suggestions/partials/apply_dialog.html", context, status=status)


def _nothing_to_apply(request: AuthedRequest, agent: Agent, run: Run) -> HttpResponse:
    message = (
        "Every suggestion of this run has been applied."
        if run.suggestions.exists()
        else "This run has no suggestions to apply."
    )
    if request.htmx:
        return trigger_client_event(HttpResponse(status=204), "toast", {"message": message, "level": "info"})
    messages.info(request, message)
    return redirect(_run_url(agent, run))


@login_required
@require_http_methods(["GET", "POST"])
def apply(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """Step 1: tick and edit suggestions. Posting it saves the edits and starts the model's
    rewrite in the background (the dialog polls it), or without a model shows step 2 at once."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    suggestions = _proposed(run)
    if not suggestions:
        return _nothing_to_apply(request, agent, run)
    data = request.POST if request.method == "POST" else None
    formset = edit_formset(suggestions=suggestions, data=data, selected=_selected_ids(request))
    error = ""
    if request.method == "POST" and formset.is_valid():
        try:
            if blocker := selectors.suggestion_apply_blocker(agent=agent):
                raise ValidationError(blocker)
            chosen = services.suggestion_edits_validate(run=run, edits=formset.edits())
            if llm.is_configured("llm"):
                job = rewrite.rewrite_job_start(run=run, user=request.user, suggestions=chosen)
                return _job_started(request, agent, run, job)
            base = agent.current_version
            # Offline, a rewrite adds each suggestion's text: string work, no model call.
            preview = services.suggestion_rewrite_preview(run=run, suggestions=chosen)
        except ValidationError as exc:
            error = _message(exc)
        else:
            texts = {name: proposed for name, (_current, proposed) in preview.items()}
            return _review_response(request, agent, run, chosen, base, texts)
    return _edit_response(request, agent, run, suggestions, formset, error)


def _selected_ids(request: AuthedRequest) -> set[int] | None:
    """Step 2's Back link carries the ticked suggestions, so going back keeps the choice."""
    raw = request.GET.get("selected")
    if raw is None:
        return None
    return {int(part) for part in raw.split(",") if part.strip().isdigit()}


def _rows(formset: Any, suggestions: list[Suggestion]) -> list[tuple[Any, Suggestion | None]]:
    """Each form with its suggestion (None when a posted id is not a proposed one any more)."""
    by_id = {str(s.pk): s for s in suggestions}
    return [(form, by_id.get(str(form["id"].value()))) for form in formset.forms]


def _edit_response(
    request: AuthedRequest, agent: Agent, run: Run, suggestions: list[Suggestion], formset: Any, error: str
) -> HttpResponse:
    context = {
        "agent": agent,
        "run": run,
        "formset": formset,
        "rows": _rows(formset, suggestions),
        "error": error,
        "is_http": agent.kind == Agent.Kind.HTTP,
        "model_rewrites": llm.is_configured("llm"),
    }
    return _dialog_response(request, "suggestions/partials/apply_edit.html", context)


def _review_response(
    request: AuthedRequest,
    agent: Agent,
    run: Run,
    chosen: list[Suggestion],
    base: AgentVersion | None,
    texts: dict[str, str],
    form: ApplyConfirmForm | None = None,
    status: int = 200,
) -> HttpResponse:
    """Step 2: per affected field, the diff against the current text and the editable final text."""
    used = KIND_FIELDS[agent.kind]
    fields = []
    reached = False
    for name in services.EDITABLE_FIELDS:
        if name not in texts or base is None:
            continue
        group = [s for s in chosen if s.target_field == name]
        check = change_check(run=run, agent=agent, base=base, field=name, text=texts[name], group=group)
        reached = reached or bool(check.affected)
        fields.append({
            "name": name,
            "label": LABELS[name],
            "text": texts[name],
            "diff": selectors.preview_diff(version=base, field_name=name, text=texts[name]),
            "suggestions": group,
            "unused": name not in used,
            "check": check,
        })  # fmt: skip
    can_preview = reached and llm.is_configured("llm") and agent.kind != Agent.Kind.HTTP
    context = {"agent": agent, "run": run, "chosen": chosen, "base": base, "fields": fields, "form": form,
               "can_preview": can_preview}  # fmt: skip
    return _dialog_response(request, "suggestions/partials/apply_review.html", context, status=status)


# ---- the rewrite between step 1 and step 2 (suggestions/rewrite.py) ------------------------


def _get_job_for_user(request: AuthedRequest, agent_id: int, run_id: int, job_id: int) -> tuple[Agent, Run, RewriteJob]:
    agent, run = _get_run_for_user(request, agent_id, run_id)
    return agent, run, get_object_or_404(RewriteJob.objects.select_related("base_version"), pk=job_id, run=run)


def _job_started(request: AuthedRequest, agent: Agent, run: Run, job: RewriteJob) -> HttpResponse:
    if request.htmx:
        return _job_response(request, agent, run, job)
    return redirect("suggestions:apply_job", agent.pk, run.pk, job.pk)  # the page polls itself


def _job_response(request: AuthedRequest, agent: Agent, run: Run, job: RewriteJob, error: str = "") -> HttpResponse:
    """While the model rewrites: the progress step, polling itself. Once every field is
    rewritten (or kept): step 2, with 286 so the poll stops. A failure, a cancel or a field
    that needs the user's choice: the progress step without its poll."""
    done = job.field_count(RewriteJob.FieldStatus.DONE)
    failed = job.field_count(RewriteJob.FieldStatus.FAILED)
    settled = HTMX_STOP_POLLING if request.method == "GET" and not job.is_active else 200
    if job.status == RewriteJob.Status.DONE and done and not failed and not error:
        texts = {e["name"]: e["text"] for e in job.fields if e["status"] == RewriteJob.FieldStatus.DONE}
        # A field kept as it was applies none of its suggestions: they stay proposed.
        by_id = {s.pk: s for s in _proposed(run) if s.target_field in texts}
        chosen = [by_id[pk] for pk in job.suggestion_ids if pk in by_id]
        return _review_response(request, agent, run, chosen, job.base_version, texts, status=settled)
    context = {"agent": agent, "run": run, "job": job, "progress": _progress(job), "error": error}
    return _dialog_response(request, "suggestions/partials/apply_progress.html", context, status=settled)


def _progress(job: RewriteJob) -> dict[str, Any]:
    """What the progress step says: a headline ("Rewriting the knowledge… 1 of 3 done") and one row per field."""
    rows = [{**entry, "label": LABELS[entry["name"]], "status_label": RewriteJob.FieldStatus(entry["status"]).label}
            for entry in job.fields]  # fmt: skip
    if not job.is_active:  # cancelled or failed: what was waiting or in flight will not be rewritten
        for row in rows:
            if row["status"] in (RewriteJob.FieldStatus.PENDING, RewriteJob.FieldStatus.RUNNING):
                row["status"], row["status_label"] = "stopped", "Not rewritten"
    done = job.field_count(RewriteJob.FieldStatus.DONE, RewriteJob.FieldStatus.KEPT)
    busy = next((r for r in rows if r["status"] == RewriteJob.FieldStatus.RUNNING), None) or next(
        (r for r in rows if r["status"] == RewriteJob.FieldStatus.PENDING), None
    )
    headline = ""
    if job.is_active and busy is not None:
        headline = f"Rewriting the {busy['label'].lower()}… {done} of {len(rows)} done"
    return {
        "rows": rows,
        "headline": headline,
        "failed": [r for r in rows if r["status"] == RewriteJob.FieldStatus.FAILED],
        "nothing_changed": job.status == RewriteJob.Status.DONE and not job.field_count(RewriteJob.FieldStatus.DONE,
                                                                                       RewriteJob.FieldStatus.FAILED),
        "selected": ",".join(str(pk) for pk in job.suggestion_ids),
    }  # fmt: skip


@login_required
@require_GET
def apply_job(request: AuthedRequest, agent_id: int, run_id: int, job_id: int) -> HttpResponse:
    """The rewrite's progress (the dialog polls it every 3 s), then step 2."""
    agent, run, job = _get_job_for_user(request, agent_id, run_id, job_id)
    return _job_response(request, agent, run, job)


@login_required
@require_POST
def apply_job_action(request: AuthedRequest, agent_id: int, run_id: int, job_id: int) -> HttpResponse:
    """Cancel the rewrite; or, once it has settled, try a failed field (or the whole job) again,
    or keep a failed field's current text."""
    agent, run, job = _get_job_for_user(request, agent_id, run_id, job_id)
    form = RewriteActionForm(request.POST)
    error = ""
    if not form.is_valid():
        error = "Choose Cancel, Try again or Keep the original."
    else:
        action, field = form.cleaned_data["action"], form.cleaned_data["field"] or None
        try:
            if action == RewriteActionForm.CANCEL:
                job = rewrite.rewrite_job_cancel(job=job)
            elif action == RewriteActionForm.RETRY:
                job = rewrite.rewrite_job_retry(job=job, field=field)
            else:
                job = rewrite.rewrite_field_keep(job=job, field=field or "")
        except ValidationError as exc:
            error = _message(exc)
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect("suggestions:apply_job", agent.pk, run.pk, job.pk)
    job.refresh_from_db()
    return _job_response(request, agent, run, job, error)


@login_required
@require_POST
def apply_confirm(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """Step 2 posted: the final texts become a new version; the suggestions are marked applied."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    form = ApplyConfirmForm(request.POST, run=run)
    if form.is_valid():
        chosen = list(form.cleaned_data["suggestions"])
        try:
            version = services.suggestion_apply(
                run=run,
                user=request.user,
                suggestions=chosen,
                fields=form.texts(),
                base_version=form.cleaned_data["base_version"],
            )
        except ValidationError as error:
            form.add_error(None, error)
        else:
            return _applied(request, agent, run, version)
        texts = form.texts()
        return _review_response(request, agent, run, chosen, form.cleaned_data["base_version"], texts, form)
    context = {"agent": agent, "run": run, "form": form}
    return _dialog_response(request, "suggestions/partials/apply_problem.html", context)


def _applied(request: AuthedRequest, agent: Agent, run: Run, version: AgentVersion) -> HttpResponse:
    message = f"Saved as version {version.number}. Verify it against this run's cases to see what it fixed."
    if not request.htmx:
        messages.success(request, message)
        return redirect(_run_url(agent, run))
    # Swap the whole panel, dialog slot included: the open dialog leaves with it, and the
    # panel shows the applied suggestions, the new version's diff and Verify. (A client
    # redirect to the run page would not reload it: only its #fragment would differ.)
    panel = selectors.suggestion_panel_get(agent=agent, run=run)
    response = render(request, "suggestions/partials/panel.html", {"agent": agent, "run": run, "panel": panel})
    retarget(response, "#suggestions")
    # The header directly: django-htmx types reswap() with the bare styles, without modifiers like show:.
    response["HX-Reswap"] = "outerHTML show:#suggestions:top"
    return trigger_client_event(response, "toast", {"message": message, "level": "success"})


@login_required
@require_POST
def apply_diff(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """Step 2's diff of one field, refreshed as the user edits its final text."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    form = ApplyDiffForm(request.POST, run=run)
    if not form.is_valid():
        return HttpResponse(status=204)  # nothing sensible to show: keep the last diff
    name = form.cleaned_data["field"]
    diff = selectors.preview_diff(version=form.cleaned_data["base_version"], field_name=name, text=form.text())
    return render(request, "suggestions/partials/field_diff.html", {"diff": diff, "label": LABELS[name]})


@login_required
@require_POST
def change_request(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """HTTP agents: the ticked (and edited) suggestions as a Markdown file to hand to their team."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    suggestions = _proposed(run)
    if not suggestions:
        return _nothing_to_apply(request, agent, run)
    formset = edit_formset(suggestions=suggestions, data=request.POST)
    error = ""
    if formset.is_valid():
        try:
            chosen = services.suggestion_edits_validate(run=run, edits=formset.edits())
        except ValidationError as exc:
            error = _message(exc)
        else:
            markdown = services.suggestion_change_request(run=run, suggestions=chosen)
            response = HttpResponse(markdown, content_type="text/markdown; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="change-request-run-{run.pk}.md"'
            return response
    return _edit_response(request, agent, run, suggestions, formset, error)


# ---- Verify ----------------------------------------------------------------------------


@login_required
@require_POST
def verify(request: AuthedRequest, agent_id: int, run_id: int) -> HttpResponse:
    """Re-run this run's cases (all, or the failing ones and a sample) against a new version."""
    agent, run = _get_run_for_user(request, agent_id, run_id)
    form = VerifyForm(request.POST, run=run)
    if not form.is_valid():
        return _after_post(request, agent, run, " ".join(form_messages(form)), "error")
    try:
        child = run_verify_start(
            parent=run,
            user=request.user,
            version=form.cleaned_data["version"],
            sample_passing=form.sample_passing(),
            request_key=form.cleaned_data["request_key"],
        )
    except ValidationError as error:
        return _after_post(request, agent, run, _message(error), "error")
    cases = f"{child.total} case{'s' if child.total != 1 else ''}"
    message = f"Verifying version {child.agent_version.number} on {cases}: run #{child.pk}."
    return _after_post(request, agent, run, message, "success")
