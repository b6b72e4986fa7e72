"""JSON API for a run's suggested changes: the panel, the suggestion job, Apply (step 1 with
edits, the model's rewrite job, the review's diff and preview, confirm), the change request of
HTTP agents, and Verify. The same forms, services and messages as suggestions/views.py.

Every run is reached through the token owner's teams: another team's run is a 404.
Versions are named by their number, as on the pages.
"""

from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from ninja import Router, Status

from agents.diff import LABELS
from agents.models import Agent, AgentVersion
from agents.services import KIND_FIELDS
from evalsite import llm
from evalsite.api_errors import form_refusal, refusal
from evalsite.forms import form_messages
from evalsite.http import ApiRequest
from evalsite.idempotency import idempotency_header, idempotent_create, loader
from runs.api_schemas import ErrorOut, RunOut
from runs.models import Run
from runs.selectors import run_get_for_user
from runs.services import run_verify_start
from suggestions import rewrite, selectors, services
from suggestions.affected import change_check
from suggestions.api_schemas import (
    AppliedOut,
    ApplyIn,
    ApplyJobActionIn,
    ApplyJobOut,
    ApplyReviewOut,
    ConfirmIn,
    DiffIn,
    DiffOut,
    GenerationOut,
    PanelOut,
    PreviewOut,
    SuggestionOut,
    VerifyIn,
)
from suggestions.forms import ApplyConfirmForm, ApplyDiffForm, RewriteActionForm, VerifyForm, edit_formset
from suggestions.models import PreviewJob, RewriteJob, Suggestion
from suggestions.preview import preview_lost, preview_start

router = Router(tags=["suggestions"])

SUGGESTIONS = "/runs/{run_id}/suggestions"
IDEMPOTENCY = idempotency_header()


def _run(request: ApiRequest, run_id: int) -> Run:
    return run_get_for_user(user=request.user, run_id=run_id)


def _suggestion(item: Suggestion) -> dict[str, Any]:
    return {
        "id": item.pk,
        "title": item.title,
        "category": item.category,
        "target_field": item.target_field,
        "description": item.description,
        "proposed_text": item.proposed_text,
        "state": item.state,
        "offline": item.offline,
        "cases": [case.display_number for case in item.cases.all()],
        "applied_version": item.applied_version.number if item.applied_version else None,
    }


def _proposed(run: Run) -> list[Suggestion]:
    return list(selectors.suggestion_list(run=run).filter(state=Suggestion.State.PROPOSED))


def _nothing_to_apply(run: Run) -> Status[Any]:
    if run.suggestions.exists():
        return refusal(409, "Every suggestion of this run has been applied.")
    return refusal(409, "This run has no suggestions to apply.")


# ---- the panel and the suggestion job ------------------------------------------------------


@router.get(SUGGESTIONS, response=PanelOut, url_name="suggestions_panel", summary="A run's suggestions and their job")
def suggestion_panel(request: ApiRequest, run_id: int) -> dict[str, Any]:
    """The run page's Suggested changes panel: its state, the suggestion job, every suggestion."""
    run = _run(request, run_id)
    panel = selectors.suggestion_panel_get(agent=run.agent, run=run)
    return {
        "state": panel.state,
        "generation": panel.generation,
        "suggestions": [_suggestion(item) for item in panel.suggestions],
        "apply_blocker": panel.apply_blocker,
        "verify_version": panel.verify_version.number if panel.verify_version else None,
    }


@router.post(
    f"{SUGGESTIONS}/generate",
    response={202: GenerationOut, 400: ErrorOut},
    url_name="suggestions_generate",
    summary="Generate suggestions for a completed run (a worker job)",
)
def suggestion_generate(request: ApiRequest, run_id: int) -> Status[Any]:
    """Queue the run's suggestion job ("Suggest changes", "Try again"); poll
    GET .../suggestions (its `generation` and `state`). Idempotent by nature: a run has one job, and a job that is
    queued, running or done (with suggestions) is answered as it is."""
    run = _run(request, run_id)
    try:
        generation = services.suggestion_generation_start(run=run, user=request.user)
    except ValidationError as error:
        return refusal(400, error)
    return Status(202, generation)


@router.get(
    f"{SUGGESTIONS}/list", response=list[SuggestionOut], url_name="suggestions_list", summary="A run's suggestions"
)
def suggestion_list(request: ApiRequest, run_id: int) -> list[dict[str, Any]]:
    return [_suggestion(item) for item in selectors.suggestion_list(run=_run(request, run_id))]


# ---- Apply: step 1, the rewrite job, step 2 ----------------------------------------------------


def _edit_data(suggestions: list[Suggestion], payload: ApplyIn) -> dict[str, Any]:
    """The chosen suggestions and their edits as step 1's formset would post them."""
    edits = {edit.id: edit for edit in payload.suggestions}
    data: dict[str, Any] = {"s-TOTAL_FORMS": str(len(suggestions)), "s-INITIAL_FORMS": str(len(suggestions))}
    for index, item in enumerate(suggestions):
        edit = edits.get(item.pk)
        data[f"s-{index}-id"] = item.pk
        data[f"s-{index}-title"] = edit.title if edit and edit.title is not None else item.title
        data[f"s-{index}-category"] = edit.category if edit and edit.category is not None else item.category
        description = edit.description if edit and edit.description is not None else item.description
        data[f"s-{index}-description"] = description
        if edit:
            data[f"s-{index}-selected"] = "on"
    return data


def _chosen(run: Run, payload: ApplyIn) -> list[Suggestion]:
    """Step 1's validation: the formset, then the service that saves the edits."""
    suggestions = _proposed(run)
    unknown = {edit.id for edit in payload.suggestions} - {item.pk for item in suggestions}
    if unknown:
        raise ValidationError(
            "One of these suggestions was applied or removed meanwhile. Close the dialog and start again."
        )
    formset = edit_formset(suggestions=suggestions, data=_edit_data(suggestions, payload))
    if not formset.is_valid():
        problems = [message for form in formset.forms for message in form_messages(form)]
        raise ValidationError(" ".join([*problems, *[str(m) for m in formset.non_form_errors()]]))
    return services.suggestion_edits_validate(run=run, edits=formset.edits())


def _review(run: Run, chosen: list[Suggestion], base: AgentVersion | None, texts: dict[str, str]) -> dict[str, Any]:
    """Step 2 as the dialog shows it: per field, the diff, what it reaches, and any leak."""
    agent = run.agent
    fields = []
    for name in services.EDITABLE_FIELDS:
        if name not in texts or base is None:
            continue
        group = [s for s in chosen if s.target_field == name]
        check = change_check(run=run, agent=agent, base=base, field=name, text=texts[name], group=group)
        diff = selectors.preview_diff(version=base, field_name=name, text=texts[name])
        fields.append({
            "name": name, "label": LABELS[name], "current": getattr(base, name), "text": texts[name],
            "diff": diff.lines if diff else [], "suggestions": [s.pk for s in group],
            "unused": name not in KIND_FIELDS[agent.kind], "leaks": [leak.reason for leak in check.leaks],
            "affected": check.affected,
        })  # fmt: skip
    reached = any(field["affected"] for field in fields)
    return {
        "suggestions": [s.pk for s in chosen],
        "base_version": base.number if base else None,
        "fields": fields,
        "can_preview": reached and llm.is_configured("llm") and agent.kind != Agent.Kind.HTTP,
    }


def _job(run: Run, job: RewriteJob) -> dict[str, Any]:
    review = None
    done = job.field_count(RewriteJob.FieldStatus.DONE)
    if job.status == RewriteJob.Status.DONE and done and not job.field_count(RewriteJob.FieldStatus.FAILED):
        texts = {e["name"]: e["text"] for e in job.fields if e["status"] == RewriteJob.FieldStatus.DONE}
        by_id = {s.pk: s for s in _proposed(run) if s.target_field in texts}
        review = _review(run, [by_id[pk] for pk in job.suggestion_ids if pk in by_id], job.base_version, texts)
    return {
        "id": job.pk,
        "status": job.status,
        "error": job.error,
        "base_version": job.base_version.number,
        "suggestions": job.suggestion_ids,
        "fields": job.fields,
        "review": review,
    }


@router.post(
    f"{SUGGESTIONS}/apply",
    response={200: ApplyReviewOut, 202: ApplyJobOut, 400: ErrorOut, 409: ErrorOut},
    url_name="suggestions_apply",
    summary="Apply, step 1: choose and edit suggestions",
)
def suggestion_apply(
    request: ApiRequest, run_id: int, payload: ApplyIn, idempotency_key: str = IDEMPOTENCY
) -> Status[Any]:
    """Saves the edits. With a model, starts its rewrite of each affected field (202, a job to
    poll at .../apply/jobs/{job_id}: its `review` appears once it is done); without one, answers
    the review at once (200): per field the final text to confirm at .../apply/confirm."""
    run = _run(request, run_id)
    if not _proposed(run):
        return _nothing_to_apply(run)
    try:
        if blocker := selectors.suggestion_apply_blocker(agent=run.agent):
            raise ValidationError(blocker)
        if llm.is_configured("llm"):
            job, _replayed = idempotent_create(
                user=request.user,
                operation=f"suggestions_apply:{run_id}",
                key=idempotency_key,
                body=payload.model_dump(),
                load=loader(RewriteJob),
                create=lambda: rewrite.rewrite_job_start(run=run, user=request.user, suggestions=_chosen(run, payload)),
            )
            return Status(202, _job(run, job))
        chosen = _chosen(run, payload)
        preview = services.suggestion_rewrite_preview(run=run, suggestions=chosen)
    except ValidationError as error:
        return refusal(400, error)
    texts = {name: proposed for name, (_current, proposed) in preview.items()}
    return Status(200, _review(run, chosen, run.agent.current_version, texts))


def _rewrite_job(request: ApiRequest, run_id: int, job_id: int) -> tuple[Run, RewriteJob]:
    run = _run(request, run_id)
    return run, get_object_or_404(RewriteJob.objects.select_related("base_version"), pk=job_id, run=run)


@router.get(
    f"{SUGGESTIONS}/apply/jobs/{{job_id}}",
    response=ApplyJobOut,
    url_name="suggestions_apply_job",
    summary="The model's rewrite for Apply: its progress, then the review",
)
def suggestion_apply_job(request: ApiRequest, run_id: int, job_id: int) -> dict[str, Any]:
    return _job(*_rewrite_job(request, run_id, job_id))


@router.post(
    f"{SUGGESTIONS}/apply/jobs/{{job_id}}/action",
    response={200: ApplyJobOut, 400: ErrorOut},
    url_name="suggestions_apply_job_action",
    summary="Cancel the rewrite, try a field (or all) again, or keep a field's current text",
)
def suggestion_apply_job_action(
    request: ApiRequest, run_id: int, job_id: int, payload: ApplyJobActionIn
) -> Status[Any]:
    run, job = _rewrite_job(request, run_id, job_id)
    form = RewriteActionForm({"action": payload.action, "field": payload.field})
    if not form.is_valid():
        return form_refusal(400, form)
    action, field = form.cleaned_data["action"], form.cleaned_data["field"] or None
    try:
        if action == RewriteActionForm.CANCEL:
            rewrite.rewrite_job_cancel(job=job)
        elif action == RewriteActionForm.RETRY:
            rewrite.rewrite_job_retry(job=job, field=field)
        else:
            rewrite.rewrite_field_keep(job=job, field=field or "")
    except ValidationError as error:
        return refusal(400, error)
    return Status(200, _job(*_rewrite_job(request, run_id, job_id)))


def _review_data(run: Run, payload: ConfirmIn | DiffIn) -> dict[str, Any]:
    """A step-2 post as the dialog's hidden fields carry it (the base version by its pk)."""
    base = AgentVersion.objects.filter(agent_id=run.agent_id, number=payload.base_version).first()
    return {"suggestions": payload.suggestions, "base_version": base.pk if base else ""}


def _confirmed(run: Run, payload: ConfirmIn) -> ApplyConfirmForm:
    """Step 2's final texts, validated by the dialog's form (its messages make one refusal)."""
    data: dict[str, Any] = {**_review_data(run, payload), "fields_changed": list(payload.texts)}
    data.update({str(name): text for name, text in payload.texts.items()})
    form = ApplyConfirmForm(data, run=run)
    if not form.is_valid():
        raise ValidationError(form_messages(form))
    return form


@router.post(
    f"{SUGGESTIONS}/apply/confirm",
    response={200: AppliedOut, 201: AppliedOut, 400: ErrorOut},
    url_name="suggestions_apply_confirm",
    summary="Apply, step 2: the final texts become a new agent version",
)
def suggestion_apply_confirm(
    request: ApiRequest, run_id: int, payload: ConfirmIn, idempotency_key: str = IDEMPOTENCY
) -> Status[Any]:
    """Refused (400, the page's message) for text that would teach the agent its test, when the
    agent changed since the review, or when nothing changes. The same Idempotency-Key answers 200
    with the version the first request made."""
    run = _run(request, run_id)

    def apply() -> AgentVersion:
        form = _confirmed(run, payload)
        chosen = list(form.cleaned_data["suggestions"])
        return services.suggestion_apply(run=run, user=request.user, suggestions=chosen, fields=form.texts(),
                                         base_version=form.cleaned_data["base_version"])  # fmt: skip

    try:
        version, replayed = idempotent_create(
            user=request.user,
            operation=f"suggestions_apply_confirm:{run_id}",
            key=idempotency_key,
            body=payload.model_dump(),
            load=loader(AgentVersion),
            create=apply,
        )
    except ValidationError as error:
        return refusal(400, error)
    message = f"Saved as version {version.number}. Verify it against this run's cases to see what it fixed."
    applied = list(run.suggestions.filter(applied_version=version).values_list("pk", flat=True))
    body = {"agent_id": run.agent_id, "version": version.number, "suggestions": applied, "message": message}
    return Status(200 if replayed else 201, body)


@router.post(
    f"{SUGGESTIONS}/apply/diff",
    response={200: DiffOut, 400: ErrorOut},
    url_name="suggestions_apply_diff",
    summary="Step 2's diff of one field's edited text against the base version",
)
def suggestion_apply_diff(request: ApiRequest, run_id: int, payload: DiffIn) -> Status[Any]:
    run = _run(request, run_id)
    form = ApplyDiffForm({**_review_data(run, payload), "field": payload.field, payload.field: payload.text}, run=run)
    if not form.is_valid():
        return form_refusal(400, form)
    name = form.cleaned_data["field"]
    diff = selectors.preview_diff(version=form.cleaned_data["base_version"], field_name=name, text=form.text())
    lines = diff.lines if diff else []
    body = {"field": name, "label": LABELS[name], "lines": lines, "added": diff.added if diff else 0,
            "removed": diff.removed if diff else 0}  # fmt: skip
    return Status(200, body)


def _preview(job: PreviewJob) -> dict[str, Any]:
    rows = job.results
    return {
        "id": job.pk,
        "status": job.status,
        "lost": preview_lost(job),
        "error": job.error,
        "positions": len(job.positions),
        "results": rows,
        "breaks": sum(1 for row in rows if row["before"] == "pass" and row["status"] != "pass"),
        "fixes": sum(1 for row in rows if row["before"] != "pass" and row["status"] == "pass"),
    }


@router.post(
    f"{SUGGESTIONS}/apply/preview",
    response={200: PreviewOut, 202: PreviewOut, 400: ErrorOut},
    url_name="suggestions_apply_preview",
    summary="Preview the review's texts with the model on the cases they reach (a worker job)",
)
def suggestion_apply_preview(
    request: ApiRequest, run_id: int, payload: ConfirmIn, idempotency_key: str = IDEMPOTENCY
) -> Status[Any]:
    """Nothing is saved to the agent. Poll .../apply/preview/{preview_id}. The same
    Idempotency-Key answers 200 with the first preview."""
    run = _run(request, run_id)

    def start() -> PreviewJob:
        form = _confirmed(run, payload)
        return preview_start(run=run, user=request.user, base=form.cleaned_data["base_version"], texts=form.texts(),
                             suggestions=list(form.cleaned_data["suggestions"]))  # fmt: skip

    try:
        job, replayed = idempotent_create(
            user=request.user,
            operation=f"suggestions_apply_preview:{run_id}",
            key=idempotency_key,
            body=payload.model_dump(),
            load=loader(PreviewJob),
            create=start,
        )
    except ValidationError as error:
        return refusal(400, error)
    return Status(200 if replayed else 202, _preview(job))


@router.get(
    f"{SUGGESTIONS}/apply/preview/{{preview_id}}",
    response=PreviewOut,
    url_name="suggestions_apply_preview_job",
    summary="A preview as it goes: each case's verdict before and with the new texts",
)
def suggestion_apply_preview_job(request: ApiRequest, run_id: int, preview_id: int) -> dict[str, Any]:
    return _preview(get_object_or_404(PreviewJob, pk=preview_id, run=_run(request, run_id)))


# ---- the change request and Verify ---------------------------------------------------------------


@router.post(
    f"{SUGGESTIONS}/change-request",
    response={400: ErrorOut, 409: ErrorOut},
    url_name="suggestions_change_request",
    summary="The chosen (and edited) suggestions as a Markdown change request (HTTP agents)",
    openapi_extra={"responses": {"200": {"description": "The Markdown file", "content": {"text/markdown": {}}}}},
)
def suggestion_change_request(request: ApiRequest, run_id: int, payload: ApplyIn) -> Any:
    run = _run(request, run_id)
    if not _proposed(run):
        return _nothing_to_apply(run)
    try:
        chosen = _chosen(run, payload)
    except ValidationError as error:
        return refusal(400, error)
    response = HttpResponse(
        services.suggestion_change_request(run=run, suggestions=chosen), content_type="text/markdown; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="change-request-run-{run.pk}.md"'
    return response


@router.post(
    f"{SUGGESTIONS}/verify",
    response={200: RunOut, 201: RunOut, 400: ErrorOut},
    url_name="suggestions_verify",
    summary="Verify a version: re-run this run's cases (all, or the failing ones and a sample) against it",
)
def suggestion_verify(
    request: ApiRequest, run_id: int, payload: VerifyIn, idempotency_key: str = IDEMPOTENCY
) -> Status[Any]:
    """A new run (201, purpose "verify", parent this run). The same request_key (or
    Idempotency-Key header) answers 200 with the first one."""
    run = _run(request, run_id)
    version = AgentVersion.objects.filter(agent_id=run.agent_id, number=payload.version).first()
    if version is None:
        return refusal(400, f"This agent has no version {payload.version}.")  # as runs/api.py's re-run
    data = {"version": version.pk, "scope": payload.scope,
            "sample": "" if payload.sample is None else payload.sample,
            "request_key": payload.request_key or idempotency_key[:64]}  # fmt: skip
    form = VerifyForm(data, run=run)
    if not form.is_valid():
        return form_refusal(400, form)
    try:
        child = run_verify_start(
            parent=run,
            user=request.user,
            version=form.cleaned_data["version"],
            sample_passing=form.sample_passing(),
            request_key=form.cleaned_data["request_key"],
        )
    except ValidationError as error:
        return refusal(400, error)
    return Status(200 if child.replayed else 201, run_get_for_user(user=request.user, run_id=child.pk))
