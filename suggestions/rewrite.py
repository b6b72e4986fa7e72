"""Step 1 of the Apply dialog in the background: the model rewrites each affected field.

A rewrite is one model call per field, and a call may take minutes (the gateway's
timeout times its retries), far longer than a web request may (gunicorn's 60 s). So
the dialog starts a `RewriteJob` and polls it (docs/architecture.md, "Rewrite jobs"):

- `rewrite_job_start` records the fields to rewrite and sends one message, after commit,
  for the first of them. Each message (`rewrite_field_run`, its own task) claims one
  pending field, asks the model with no transaction open, saves the text or the
  error under the job's row lock, and sends the message for the next field. One field
  per task keeps every task well inside the hard time limit.
- `rewrite_job_cancel` settles the job; a message arriving afterwards claims nothing,
  and the answer of a call in flight is dropped, so no model call starts after Cancel.
- A field that fails keeps its message; once the job has settled the user retries the
  field (`rewrite_job_retry`) or keeps its current text (`rewrite_field_keep`).
- `rewrite_job_reap` (beat) fails a job whose worker died mid-field, and re-sends the
  message of a job whose message was lost (Redis restarted).

Every enqueue carries a fresh token, so a message of an earlier attempt does nothing.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from agents.models import Agent
from evalsite import llm, workers
from runs.models import Run
from suggestions.models import RewriteJob, Suggestion
from suggestions.services import EDITABLE_FIELDS, suggestion_field_rewrite

logger = logging.getLogger(__name__)

Status = RewriteJob.Status
FieldStatus = RewriteJob.FieldStatus
WORKER_LOST = (
    "The rewrite stopped because the worker running it was lost (restarted or out of memory). "
    "Nothing was changed: try again."
)
NOT_PICKED_UP = (
    "No worker picked up the rewrite, so nothing was changed. "
    "Check that the Evalsite worker is running, then try again."
)
INTERNAL_ERROR = "An internal error stopped the rewrite of this field. The details are in the worker log."
# A job whose next message has waited this long without a worker is failed, not re-sent forever.
QUEUE_GIVE_UP = timedelta(minutes=10)


def rewrite_job_start(*, run: Run, user: User | None, suggestions: list[Suggestion]) -> RewriteJob:
    """Queue the rewrite of every field the chosen suggestions change, and cancel any other
    rewrite of this run still going (its dialog was left, or reopened)."""
    if run.agent.kind == Agent.Kind.HTTP:
        raise ValidationError("HTTP agents are configured elsewhere: download the change request instead.")
    if not suggestions:
        raise ValidationError("Select at least one suggestion to apply.")
    base = run.agent.current_version or run.agent_version
    targets = {suggestion.target_field for suggestion in suggestions}
    fields = [
        {"name": name, "status": FieldStatus.PENDING, "current": getattr(base, name), "text": "", "error": ""}
        for name in EDITABLE_FIELDS
        if name in targets
    ]
    now = timezone.now()
    with transaction.atomic():
        RewriteJob.objects.filter(run=run, status__in=RewriteJob.ACTIVE_STATUSES).update(
            status=Status.CANCELLED, finished_at=now
        )
        job = RewriteJob.objects.create(
            run=run,
            base_version=base,
            suggestion_ids=[s.pk for s in suggestions],
            fields=fields,
            token=uuid.uuid4().hex,
            requested_by=user if user is not None and user.is_authenticated else None,
            queued_at=now,
        )
        _enqueue(job, fields[0]["name"])
    return job


def _enqueue(job: RewriteJob, field: str) -> None:
    from suggestions.tasks import rewrite_field_run as rewrite_field_run_task

    job_id, token = job.pk, job.token
    # robust: if Redis is down the job stays queued and the reaper sends the message again.
    transaction.on_commit(lambda: rewrite_field_run_task.delay(job_id, token, field), robust=True)


def rewrite_field_run(*, job_id: int, token: str, field: str, retry: bool = False) -> None:
    """The task of one field: claim it, ask the model, save the outcome, queue the next field."""
    claimed = _claim(job_id, token, field, retry=retry)
    if claimed is None:
        return
    job, entry = claimed
    try:
        text, error = _rewrite(job, entry), ""
    except DatabaseError:
        raise  # the task retries database errors and takes its own claim up again
    except ValidationError as exc:
        text, error = "", " ".join(exc.messages)
    except llm.LLMError as exc:
        text, error = "", f"The model could not rewrite the {field}: {exc.message}"
    except Exception:
        logger.exception("Rewrite job %s: the %s failed unexpectedly", job_id, field)
        text, error = "", INTERNAL_ERROR
    _save(job_id, token, field, text=text, error=error)


def _claim(job_id: int, token: str, field: str, *, retry: bool) -> tuple[RewriteJob, dict[str, Any]] | None:
    """Take the field (pending, or ours again after a database retry); None when this message
    is stale: cancelled, settled, retried with a new token, or the field taken already."""
    with transaction.atomic():
        job = RewriteJob.objects.select_for_update().filter(pk=job_id, token=token).first()
        if job is None or not job.is_active:
            return None
        entry = _entry(job, field)
        mine_again = retry and entry["status"] == FieldStatus.RUNNING and job.claimed_by == workers.WORKER_ID
        if entry["status"] != FieldStatus.PENDING and not mine_again:
            return None
        entry["status"] = FieldStatus.RUNNING
        job.status, job.claimed_by, job.claimed_at = Status.RUNNING, workers.WORKER_ID, timezone.now()
        job.save(update_fields=["fields", "status", "claimed_by", "claimed_at"])
    return job, entry


def _rewrite(job: RewriteJob, entry: dict[str, Any]) -> str:
    by_id = {s.pk: s for s in Suggestion.objects.filter(pk__in=job.suggestion_ids)}
    group = [by_id[pk] for pk in job.suggestion_ids if pk in by_id and by_id[pk].target_field == entry["name"]]
    if not group:
        raise ValidationError(
            "The suggestions for this field were removed meanwhile. Close the dialog and start again."
        )
    run = Run.objects.select_related("agent").get(pk=job.run_id)
    return suggestion_field_rewrite(run=run, field=entry["name"], current=entry["current"], group=group)


def _save(job_id: int, token: str, field: str, *, text: str, error: str) -> None:
    """Record the field's outcome unless the job was cancelled or retried meanwhile (then the
    answer is dropped), and hand on to the next pending field or settle the job."""
    with transaction.atomic():
        job = RewriteJob.objects.select_for_update().filter(pk=job_id, token=token, status=Status.RUNNING).first()
        if job is None:
            return
        entry = _entry(job, field)
        if entry["status"] != FieldStatus.RUNNING:
            return
        entry.update(status=FieldStatus.FAILED if error else FieldStatus.DONE, text=text, error=error)
        job.claimed_by, job.claimed_at = "", None
        following = next((e["name"] for e in job.fields if e["status"] == FieldStatus.PENDING), None)
        if following is None:
            job.status, job.finished_at = Status.DONE, timezone.now()
        else:
            job.queued_at, job.resent_at = timezone.now(), None
            _enqueue(job, following)
        job.save(
            update_fields=["fields", "status", "claimed_by", "claimed_at", "finished_at", "queued_at", "resent_at"]
        )


def _entry(job: RewriteJob, field: str) -> dict[str, Any]:
    for entry in job.fields:
        if entry["name"] == field:
            return entry
    raise ValidationError(f"This rewrite does not change the {field}.")


def rewrite_job_cancel(*, job: RewriteJob) -> RewriteJob:
    """Stop the job: no message claims a field afterwards, and a call in flight is dropped."""
    RewriteJob.objects.filter(pk=job.pk, status__in=RewriteJob.ACTIVE_STATUSES).update(
        status=Status.CANCELLED, finished_at=timezone.now(), claimed_by="", claimed_at=None
    )
    job.refresh_from_db()
    return job


def rewrite_job_retry(*, job: RewriteJob, field: str | None = None) -> RewriteJob:
    """Rewrite one failed field again, or (no field) every field a failed or cancelled job left."""
    with transaction.atomic():
        job = RewriteJob.objects.select_for_update().get(pk=job.pk)
        if job.is_active:
            raise ValidationError("The rewrite is still going: wait for it to finish.")
        if field is not None and _entry(job, field)["status"] != FieldStatus.FAILED:
            raise ValidationError(f"The {field} was not a failed rewrite: nothing to try again.")
        if field is None and job.status not in (Status.FAILED, Status.CANCELLED):
            raise ValidationError("Choose the field to try again.")
        unfinished = (FieldStatus.PENDING, FieldStatus.RUNNING, FieldStatus.FAILED)
        again = [
            entry
            for entry in job.fields
            if (entry["name"] == field if field is not None else entry["status"] in unfinished)
        ]
        if not again:
            raise ValidationError("Every field is rewritten already.")
        for entry in again:
            entry.update(status=FieldStatus.PENDING, text="", error="")
        job.status, job.error, job.token = Status.QUEUED, "", uuid.uuid4().hex
        job.queued_at, job.finished_at, job.claimed_by, job.claimed_at = timezone.now(), None, "", None
        job.resent_at = None
        job.save()
        _enqueue(job, again[0]["name"])
    return job


def rewrite_field_keep(*, job: RewriteJob, field: str) -> RewriteJob:
    """A failed field keeps its current text: step 2 then reviews the other fields."""
    with transaction.atomic():
        job = RewriteJob.objects.select_for_update().get(pk=job.pk)
        if job.is_active:
            raise ValidationError("The rewrite is still going: wait for it to finish.")
        entry = _entry(job, field)
        if entry["status"] != FieldStatus.FAILED:
            raise ValidationError(f"The {field} was not a failed rewrite: there is nothing to keep.")
        entry.update(status=FieldStatus.KEPT, text="", error="")
        job.save(update_fields=["fields"])
    return job


def rewrite_job_fail(*, job_id: int, error: str) -> None:
    """Settle an active job as failed (the task's on_failure, the reaper); the running field
    fails with it, so the dialog offers Try again."""
    with transaction.atomic():
        job = RewriteJob.objects.select_for_update().filter(pk=job_id, status__in=RewriteJob.ACTIVE_STATUSES).first()
        if job is None:
            return
        for entry in job.fields:
            if entry["status"] == FieldStatus.RUNNING:
                entry.update(status=FieldStatus.FAILED, error=error)
        job.status, job.error, job.finished_at = Status.FAILED, error, timezone.now()
        job.claimed_by, job.claimed_at = "", None
        job.save()


def rewrite_job_reap() -> None:
    """Beat: a job whose worker died mid-field is failed (late acks would redeliver its message
    only after the visibility timeout, hours later); a job whose message was lost gets it again."""
    now = timezone.now()
    live = set(workers.live_worker_ids())
    ttl = timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_TTL)
    # No task outlives the hard time limit: a claim older than that is dead whoever made it.
    hard_limit = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    for job in RewriteJob.objects.filter(status=Status.RUNNING, claimed_at__isnull=False):
        assert job.claimed_at is not None
        dead_worker = job.claimed_by and job.claimed_by not in live and job.claimed_at < now - ttl
        if dead_worker or job.claimed_at < hard_limit:
            rewrite_job_fail(job_id=job.pk, error=WORKER_LOST)
    stale = now - timedelta(seconds=settings.EVALSITE_STALE_QUEUE_SECONDS)
    waiting = RewriteJob.objects.filter(
        Q(status=Status.QUEUED) | Q(status=Status.RUNNING, claimed_at__isnull=True),
        Q(resent_at__isnull=True) | Q(resent_at__lt=stale),
        queued_at__lt=stale,
    )
    for job in waiting:
        if job.queued_at < now - QUEUE_GIVE_UP:
            rewrite_job_fail(job_id=job.pk, error=NOT_PICKED_UP)
            continue
        following = next((e["name"] for e in job.fields if e["status"] == FieldStatus.PENDING), None)
        if following is not None:
            # A duplicate is harmless: only a pending field can be claimed, once.
            with transaction.atomic():
                RewriteJob.objects.filter(pk=job.pk).update(resent_at=now)
                _enqueue(job, following)
