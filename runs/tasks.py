"""Celery entry points for runs: thin, idempotent, keyed by primary keys (docs/architecture.md, "Where logic lives")."""

from celery import Task, shared_task

# A restarting database must not lose a case: retry with backoff, the claim is re-entrant.
from evalsite.tasks import DATABASE_RETRY


@shared_task(bind=True, **DATABASE_RETRY)
def run_execute_case(self: Task, result_id: int, token: str) -> None:
    from runs.services import run_execute_case

    # A retry after a database error is this message again, not a worker that died.
    run_execute_case(result_id=result_id, token=token, retry=self.request.retries > 0)


@shared_task(**DATABASE_RETRY)
def run_finish(run_id: int) -> None:
    from runs.services import run_finish

    run_finish(run_id=run_id)


@shared_task(ignore_result=True)
def run_reap() -> None:
    """Beat, every EVALSITE_REAPER_INTERVAL s: re-queue stale work, fill empty window slots."""
    from runs.services import run_reap

    run_reap()
