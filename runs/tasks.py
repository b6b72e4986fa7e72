"""Celery entry points for runs: thin, idempotent, keyed by primary keys (docs/architecture.md, "Where logic lives")."""

from celery import Task, shared_task

# A restarting database must not lose a case: retry with backoff, the claim is re-entrant.
from evalsite.tasks import DATABASE_ERRORS, DATABASE_MAX_RETRIES, DATABASE_RETRY, database_retry_countdown


@shared_task(bind=True, max_retries=None)  # bounded below: database errors in a row, not in a lane's life
def run_execute_case(self: Task, result_id: int, token: str, asked: list[int] | None = None, failures: int = 0) -> None:
    from runs.services import run_execute_case

    # A retry after a database error is this message again, not a worker that died. It counts
    # an attempt for the cases this try asked the agent about: the retry's message carries
    # them (Celery's retry sends the request's arguments again).
    progress: set[int] = set()
    try:
        retry = self.request.retries > 0
        run_execute_case(result_id=result_id, token=token, retry=retry, asked=asked or (), progress=progress)
    except DATABASE_ERRORS as error:
        # The backoff counts the errors in a row. A lane lives for several cases, so one message
        # can meet two faults: a try that asked the agent got past the database, and an error
        # after it is a new fault, retried as soon as the first one was (a third blip of a run
        # waited 4-8 s because its lane's message had been retried twice before: issue 48).
        failures = 1 if progress else failures + 1
        if failures > DATABASE_MAX_RETRIES:
            raise
        kwargs = {**(self.request.kwargs or {}), "asked": sorted(progress), "failures": failures}
        raise self.retry(exc=error, countdown=database_retry_countdown(failures), kwargs=kwargs) from error
    finally:
        self.request.kwargs = {**(self.request.kwargs or {}), "asked": sorted(progress)}


@shared_task(**DATABASE_RETRY)
def run_finish(run_id: int) -> None:
    from runs.services import run_finish

    run_finish(run_id=run_id)


@shared_task(ignore_result=True)
def run_reap() -> None:
    """Beat, every EVALSITE_REAPER_INTERVAL s: re-queue stale work, fill empty window slots."""
    from runs.services import run_reap

    run_reap()


@shared_task(ignore_result=True)
def judge_config_preflight(config_id: int, force: bool = False) -> None:
    """The judge's preflight on the calibration set, started from a page (runs/services/preflight.py)."""
    from runs.services.preflight import judge_preflight_run

    judge_preflight_run(config_id=config_id, force=force)
