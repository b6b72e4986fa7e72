"""Celery entry points for suggestions: thin, keyed by primary keys (docs/architecture.md, "Where logic lives")."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from evalsite.llm import LLMError


# A model that cannot be reached is an expected outcome (the job records it and the run page
# says so), not a crash: `throws` keeps it out of the error log. A restarting database is
# retried; the job is idempotent (one set of suggestions per run).
@shared_task(
    throws=(LLMError,),
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=10,
)
def suggestion_generate(run_id: int) -> None:
    from suggestions.services import suggestion_generate

    suggestion_generate(run_id=run_id)
