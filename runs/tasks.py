"""Celery entry points for runs: thin, idempotent, keyed by primary keys (docs/architecture.md, "Where logic lives")."""

import gc
import logging

from celery import Task, shared_task
from celery.signals import worker_init
from django.db import InterfaceError, OperationalError

logger = logging.getLogger(__name__)

# A restarting database must not lose a case: retry with backoff, the claim is re-entrant.
DATABASE_RETRY = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 10,
}


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


@worker_init.connect
def _preload_litellm(**kwargs: object) -> None:
    """Import litellm once in the worker's main process, before the pool forks.

    The import takes seconds of CPU, and litellm's first completion imports more; done
    lazily, every pool child pays that on its first case at the same moment and a run's
    first window stalls. A mocked completion (no network) loads those modules too. The
    services the tasks import lazily (the engine, adapters, scorers) are loaded here too.
    """
    import datasets.services  # noqa: F401
    import runs.services  # noqa: F401
    import suggestions.services  # noqa: F401
    from evalsite import llm

    try:
        llm.warm_up()
    except Exception:  # a warm-up must never stop the worker from starting
        logger.warning("litellm warm-up failed; the first cases will start slower", exc_info=True)
    # Everything loaded so far lives as long as the worker: keep the garbage collector off
    # it, so pool children don't copy those pages on their first collection.
    gc.freeze()
