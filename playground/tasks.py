"""Thin Celery entry points for the playground: load by primary key, call one service."""

from typing import Any

from celery import Task, shared_task
from django.db import OperationalError

UNEXPECTED_REASON = (
    "Something went wrong while asking the agent. Send the message again; if it keeps failing, check the worker's log."
)


class _AnswerTask(Task):
    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        # An error nobody planned for still settles the exchange, so the chat never says Thinking for good.
        from playground.services import exchange_fail

        exchange_id = kwargs.get("exchange_id", args[0] if args else None)
        if exchange_id is not None:
            exchange_fail(exchange_id=exchange_id, reason=UNEXPECTED_REASON)


@shared_task(base=_AnswerTask, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=2)
def exchange_answer(exchange_id: int) -> None:
    """Ask the agent one playground message (playground.services.exchange_answer)."""
    from playground.services import exchange_answer as answer

    answer(exchange_id=exchange_id)


@shared_task
def exchange_reap() -> int:
    """Fail playground messages no worker answered in time (beat, every few seconds)."""
    from playground.services import exchange_reap as reap

    return reap()
