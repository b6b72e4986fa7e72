"""The window's plumbing: queue pending results into free slots, send task messages after commit,
and fail a run whose agent cannot run at all (systemic failure)."""

from __future__ import annotations

import uuid
from decimal import Decimal

from django.db import transaction
from django.db.models import Case, F, PositiveSmallIntegerField, Value, When
from django.utils import timezone

from evalsite.enqueue import after_commit, enqueue_on_commit
from evalsite.tasks import URGENT
from runs.models import Result, Run

UNFINISHED = (Result.Status.PENDING, *Result.IN_FLIGHT_STATUSES)
STOPPED_NOT_RUN = "Not run: the run was stopped."
# The attempts of a claimed case its lane hands back unstarted: one claimed ahead counted
# none yet; one taken in hand had counted the call it never made (issue 48).
NOT_ASKED_ATTEMPTS = Case(
    When(claimed_ahead=True, then=F("attempts")), default=F("attempts") - 1, output_field=PositiveSmallIntegerField()
)


def fill_window(run: Run) -> tuple[int, int]:
    """Queue pending results into free slots: (queued now, lanes in flight before).

    Callers hold the run row (select_for_update, or they just created it), so two
    finishing cases can't both see a free slot and overfill the window. A slot is a lane,
    one token: a lane may hold the case it claimed ahead besides its case in hand
    (runs/engine/lane.py), and a queued result has a token of its own.
    """
    in_flight = (
        Result.objects.filter(run_id=run.pk, status__in=Result.IN_FLIGHT_STATUSES).values("token").distinct().count()
    )
    free = run.concurrency - in_flight
    return (queue_pending(run.pk, free) if free > 0 else 0), in_flight


def queue_pending(run_id: int, slots: int) -> int:
    """Queue up to `slots` pending results of the run, oldest first; how many were queued."""
    ids = list(
        Result.objects.filter(run_id=run_id, status=Result.Status.PENDING)
        .order_by("id")
        .values_list("id", flat=True)[:slots]
    )
    queue(ids, status=Result.Status.PENDING)
    return len(ids)


def queue(result_ids: list[int], *, status: str | tuple[str, ...], urgent: bool = False) -> None:
    """Queue these results (still in `status`), each with a token of its own, and send their
    messages after commit. A token names one lane of the window: the task that claims the
    result keeps it for the cases it runs after it (runs/engine/execution.py). `urgent`:
    cases taken back from a lost worker, whose messages go ahead of the lanes waiting for
    their turn (their run has a slot of its window empty until one runs them)."""
    if not result_ids:
        return
    tokens = {result_id: uuid.uuid4().hex for result_id in result_ids}
    statuses = (status,) if isinstance(status, str) else status
    Result.objects.filter(pk__in=result_ids, status__in=statuses).update(
        status=Result.Status.QUEUED,
        claimed_ahead=False,  # its message's claim counts the attempt
        token=Case(*(When(pk=result_id, then=Value(token)) for result_id, token in tokens.items())),
        queued_at=timezone.now(),
    )
    enqueue_cases(tokens, urgent=urgent)


def enqueue_cases(tokens: dict[int, str], *, urgent: bool = False) -> None:
    """Send one task message per (result id, token), after commit."""
    from runs.tasks import run_execute_case as run_execute_case_task

    options = {"priority": URGENT} if urgent else {}

    def send() -> None:
        for result_id, token in tokens.items():
            run_execute_case_task.apply_async((result_id, token), **options)

    # Robust: if Redis is down the rows stay queued and the reaper sends them again.
    after_commit(send)


def enqueue_finish(run_id: int) -> None:
    from runs.tasks import run_finish as run_finish_task

    enqueue_on_commit(run_finish_task, run_id)


def money(value: float) -> Decimal:
    return Decimal(str(round(value, 6)))


def run_fail(*, run_id: int, message: str) -> None:
    """A systemic failure (the agent version can't run at all): Failed, with the reason."""
    with transaction.atomic():
        failed = Run.objects.filter(pk=run_id, status__in=Run.ACTIVE_STATUSES).update(
            status=Run.Status.FAILED, error=message, finished_at=timezone.now()
        )
        if not failed:
            return
        Result.objects.filter(run_id=run_id, status__in=UNFINISHED).update(
            status=Result.Status.SKIPPED, error=f"Not run: {message}"
        )
        enqueue_finish(run_id)
