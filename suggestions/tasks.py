"""Celery entry points for suggestions: thin, keyed by primary keys (docs/architecture.md, "Where logic lives")."""

from typing import Any

from celery import Task, shared_task

from evalsite.llm import LLMError
from evalsite.tasks import DATABASE_RETRY


# A model that cannot be reached is an expected outcome (the job records it and the run page
# says so), not a crash: `throws` keeps it out of the error log. A restarting database is
# retried; the job is idempotent (one set of suggestions per run).
@shared_task(throws=(LLMError,), **DATABASE_RETRY)
def suggestion_generate(run_id: int) -> None:
    from suggestions.services import suggestion_generate

    suggestion_generate(run_id=run_id)


class _RewriteTask(Task):
    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        # What the service did not settle (a database gone for good) still ends the dialog's wait.
        from suggestions.rewrite import INTERNAL_ERROR, rewrite_job_fail

        job_id = kwargs.get("job_id", args[0] if args else None)
        if job_id is not None:
            rewrite_job_fail(job_id=job_id, error=INTERNAL_ERROR)


# A restarting database is retried (DATABASE_RETRY); the claim lets the retry take its field back.
@shared_task(bind=True, base=_RewriteTask, **DATABASE_RETRY)
def rewrite_field_run(self: Task, job_id: int, token: str, field: str) -> None:
    from suggestions.rewrite import rewrite_field_run

    # A retry after a database error is this message again: it may take its own claim back.
    rewrite_field_run(job_id=job_id, token=token, field=field, retry=self.request.retries > 0)


@shared_task(ignore_result=True)
def rewrite_job_reap() -> None:
    """Beat, every EVALSITE_REAPER_INTERVAL s: fail rewrites whose worker died, re-send lost messages."""
    from suggestions.rewrite import rewrite_job_reap

    rewrite_job_reap()


# The job claims itself (queued -> running), so a redelivered message does nothing.
@shared_task(throws=(LLMError,))
def preview_execute(job_id: int) -> None:
    from suggestions.preview import preview_execute

    preview_execute(job_id=job_id)
