"""Celery entry points for suggestions: thin, keyed by primary keys (docs/architecture.md, "Where logic lives")."""

from celery import shared_task

from evalsite.llm import LLMError
from evalsite.tasks import DATABASE_RETRY


# A model that cannot be reached is an expected outcome (the job records it and the run page
# says so), not a crash: `throws` keeps it out of the error log. A restarting database is
# retried; the job is idempotent (one set of suggestions per run).
@shared_task(throws=(LLMError,), **DATABASE_RETRY)
def suggestion_generate(run_id: int) -> None:
    from suggestions.services import suggestion_generate

    suggestion_generate(run_id=run_id)
